"""How the CLI shows things to a person: times, durations, ids, and stream chunks. Pure, no I/O.

Rules the commands share, so that two commands never print the same thing two ways:

- ids are printed whole (a truncated id cannot be pasted into the next command);
- times are local ISO 8601 with the offset in tables (``2026-11-23T08:01:02+01:00``) and UTC ISO
  8601 with milliseconds in JSON (``2026-11-23T07:01:02.345Z``, next to the raw ``*_ms`` value);
- statuses are the words the HTTP API uses (a session's ``active`` / ``completed`` / ``failed`` /
  ``interrupted``, a run's ``running`` / ``suspended`` / ...), never a translation;
- text from models, tools and users is escaped before it reaches rich, so ``[bold]`` in a model's
  answer is printed, not interpreted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.markup import escape

from helix_dbos._clock import iso_utc  # re-exported for the commands
from helix_dbos.cli.common import compact_json
from helix_dbos.stream import chunks as c
from helix_dbos.stream.chunks import StreamChunk

__all__ = [
    "chunk_markup",
    "duration_text",
    "iso_utc",
    "local_time",
    "status_style",
]

_STATUS_STYLES = {
    "completed": "green",
    "failed": "red",
    "active": "yellow",
    "running": "yellow",
    "interrupted": "magenta",
    "suspended": "magenta",
}


def local_time(ms: int | None) -> str:
    """``ms`` since the epoch as local ISO 8601 to the second, with the offset; ``-`` for none."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


def duration_text(ms: float | None) -> str:
    """A duration for people: ``850 ms``, ``2.4 s``, ``3 min 05 s``; ``-`` when unknown."""
    if ms is None or ms < 0:
        return "-"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def status_style(status: str) -> str:
    """``status`` wrapped in its colour (the word itself unchanged)."""
    style = _STATUS_STYLES.get(status)
    return f"[{style}]{escape(status)}[/{style}]" if style else escape(status)


def chunk_markup(chunk: StreamChunk) -> tuple[str, bool] | None:
    """How a stream chunk reads in a terminal: ``(rich markup, ends_line)``, or ``None`` to skip it.

    Text deltas are printed inline (``ends_line`` False), everything else on a line of its own.
    Chunks with nothing to say to a person (state patches, checkpoints) are skipped; ``--json``
    shows every chunk raw.
    """
    if isinstance(chunk, c.TextDeltaChunk):
        return escape(chunk.content), False
    if isinstance(chunk, c.ThinkingChunk):
        return f"[dim]{escape(chunk.content)}[/dim]", False
    if isinstance(chunk, c.ToolStartChunk):
        return f"\n[yellow]→ {escape(chunk.tool_name)}[/yellow] {escape(compact_json(chunk.arguments))}", True
    if isinstance(chunk, c.ToolEndChunk):
        colour = "green" if chunk.success else "red"
        shown = chunk.result if chunk.success else chunk.error
        return f"[{colour}]← {escape(chunk.tool_name)}[/{colour}] {escape(compact_json(shown))}", True
    if isinstance(chunk, c.ToolApprovalRequestChunk):
        return (
            f"\n[bold magenta]? approval needed[/bold magenta] {escape(chunk.tool_name)} "
            f"{escape(compact_json(chunk.arguments))} (tool call {escape(chunk.tool_call_id)})",
            True,
        )
    if isinstance(chunk, c.CustomEventChunk):
        return f"[magenta]• {escape(chunk.event_name)}[/magenta] {escape(compact_json(chunk.data))}", True
    if isinstance(chunk, c.OutputChunk):
        return "\n[bold green]output[/bold green] " + escape(compact_json(_plain(chunk.output))), True
    if isinstance(chunk, c.ErrorChunk):
        return f"\n[red]error[/red] {escape(chunk.error)}", True
    if isinstance(chunk, c.RunInterruptedChunk | c.RunPausedChunk):
        word = "interrupted" if isinstance(chunk, c.RunInterruptedChunk) else "paused"
        return f"\n[magenta]{word}[/magenta]" + (f": {escape(chunk.reason)}" if chunk.reason else ""), True
    if isinstance(chunk, c.RunResumedChunk):
        return "[magenta]resumed[/magenta]", True
    if isinstance(chunk, c.StreamResyncChunk):
        return (
            f"\n[cyan]↻ resync ({chunk.reason})[/cyan] from checkpoint {escape(chunk.checkpoint_id)} "
            f"(step {chunk.step_count}, {chunk.message_count} messages)",
            True,
        )
    if isinstance(chunk, c.SubAgentStartChunk | c.SubAgentEndChunk):
        return f"[blue]{chunk.type}[/blue] {escape(compact_json(chunk.model_dump(mode='json')))}", True
    return None


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value
