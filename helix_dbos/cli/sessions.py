"""``helix-dbos sessions list`` and ``sessions show``: what ran, how long each step took, what it cost.

Both print a session's status with the word the HTTP API uses (``GET /v1/sessions/{id}``:
``active``, ``completed``, ``failed``, ``interrupted``), ids whole, and times as local ISO 8601.
``--json`` prints the same facts with stable keys (times as UTC ISO 8601 plus ``*_ms``), for
scripts. ``show`` prints message previews; ``--messages`` (or ``--full``) prints every message whole.

``show``'s usage is the API's: each run's rollup is what its ``AgentResult.usage`` says, the
session's (sub-agents included, failed-but-billed attempts apart) what ``GET /v1/sessions/{id}``
says (``usage`` in ``--json``), computed by the same function from the same records.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

import typer
from rich.markup import escape
from rich.table import Table

from helix_dbos.cli.common import (
    DatabaseUrl,
    JsonOutput,
    Wide,
    compact_json,
    console,
    existing_url,
    fits,
    friendly,
    open_store,
    print_json,
    print_table,
    sessions_app,
    sqlite_path,
)
from helix_dbos.cli.inputs import CliError
from helix_dbos.cli.render import duration_text, iso_utc, local_time, status_style
from helix_dbos.errors import SessionNotFoundError
from helix_dbos.messages import Message
from helix_dbos.session import SessionStatus
from helix_dbos.store.base import PendingToolCall, SessionRecord
from helix_dbos.usage import UsageSummary
from helix_dbos.views.timeline import RunTimeline, build_timeline, totals
from helix_dbos.views.usage_view import ToolCallUsage, run_usage, session_usage, usage_by_step

__all__ = ["session_json", "sessions_list", "sessions_show"]

_PREVIEW_CHARS = 160


def session_json(session: SessionRecord) -> dict[str, Any]:
    """A session row with stable keys (the ``sessions list --json`` item)."""
    return {
        "session_id": session.session_id,
        "agent": session.agent_type,
        "status": session.status,
        "turn": session.turn,
        "step_count": session.step_count,
        "message_count": session.message_count,
        "run_id": session.run_id,
        "created_at": iso_utc(session.created_at),
        "created_at_ms": session.created_at,
        "updated_at": iso_utc(session.updated_at),
        "updated_at_ms": session.updated_at,
        "error": session.error,
        "aborted": session.aborted,
        "forked_from": session.forked_from,
    }


@sessions_app.command("list")
@friendly
def sessions_list(
    database_url: DatabaseUrl = None,
    status: Annotated[
        str | None,
        typer.Option(
            metavar="STATUS", help="Only sessions in this status (active, completed, failed, interrupted, paused)."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, most recently updated first.")] = 20,
    as_json: JsonOutput = False,
    wide: Wide = False,
) -> None:
    """List recent sessions, most recently updated first.

    A session a table row when the table fits the terminal (or with --wide), else two lines: its
    id and status, then its agent, turn, steps, messages and last update. Ids are never cut.
    """
    if status is not None and status not in get_args(SessionStatus):
        raise CliError(f"unknown --status {status!r}: use one of {', '.join(get_args(SessionStatus))}", exit_code=2)
    store = open_store(database_url)
    try:
        found = store.list_sessions(status=status, limit=limit)  # type: ignore[arg-type]  # checked above
    finally:
        store.close()
    if as_json:
        print_json([session_json(s) for s in found])
        return
    if not found:
        console.print("no sessions" + (f" with status {escape(status)}" if status else ""))
        return
    table = Table("session", "agent", "status", "turn", "steps", "messages", "updated")
    for s in found:
        table.add_row(
            s.session_id,
            escape(s.agent_type),
            status_style(s.status),
            str(s.turn),
            str(s.step_count),
            str(s.message_count),
            local_time(s.updated_at),
        )
    if wide or fits(table):
        print_table(table)
        return
    for s in found:  # folded: a 125-column row wraps every line of an 80-column terminal's table
        console.print(f"{s.session_id}  {status_style(s.status)}", soft_wrap=True, highlight=False)
        console.print(
            f"  {escape(s.agent_type)} · turn {s.turn} · {s.step_count} steps · {s.message_count} messages · "
            f"updated {local_time(s.updated_at)}",
            highlight=False,
        )


@sessions_app.command("show")
@friendly
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="The session's id, as sessions list prints it.")],
    database_url: DatabaseUrl = None,
    messages: Annotated[
        bool, typer.Option("--messages", help="Print every message whole instead of previews (or --full).")
    ] = False,
    as_json: JsonOutput = False,
    wide: Wide = False,
    full: Annotated[bool, typer.Option("--full", hidden=True, help="The same as --messages.")] = False,
) -> None:
    """Show a session: its runs and each step's duration, tokens and cost, its state and transcript."""
    messages = messages or full
    store = open_store(database_url)
    waits: dict[str, str] = {}
    try:
        session = store.load_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        runs = store.list_runs(session_id)
        checkpoints = store.list_checkpoints(session_id, limit=100_000).items
        timelines = build_timeline(
            runs, checkpoints, {r.run_id: usage_by_step(store, session_id, r.run_id) for r in runs}
        )
        per_run = {r.run_id: run_usage(store, session_id, r.run_id) for r in runs}
        usage = _Usage(session_usage(store, session_id), per_run)
        transcript = store.get_message_prefix(session_id, session.message_count)
        pending = store.pending.open_calls(session_id)
        waits = _rate_limit_waits(database_url, [r.run_id for r in runs if r.status == "running"])
    finally:
        store.close()
    if as_json:
        print_json(_show_json(session, timelines, usage, transcript, pending, waits, with_messages=messages))
        return
    _print_session(session, timelines, usage, waits, wide=wide)
    _print_transcript(transcript, whole=messages)
    console.print(f"custom state: {escape(compact_json(session.custom_state))}", soft_wrap=True)
    _print_pending(pending)


class _Usage:
    """The API's rollups of a session: the session's (sub-agents included) and each run's."""

    def __init__(self, session: UsageSummary, runs: dict[str, UsageSummary]) -> None:
        self.session = session
        self.runs = runs

    def of_run(self, run_id: str) -> UsageSummary:
        return self.runs.get(run_id) or UsageSummary()


def _show_json(
    session: SessionRecord,
    timelines: list[RunTimeline],
    usage: _Usage,
    transcript: list[Message],
    pending: list[PendingToolCall],
    waits: dict[str, str],
    *,
    with_messages: bool,
) -> dict[str, Any]:
    shown: dict[str, Any] = {
        **session_json(session),
        "output": session.output,
        "custom_state": session.custom_state,
        "totals": totals([step.usage for t in timelines for step in t.steps]),
        "usage": usage.session.model_dump(mode="json"),
        "runs": [
            {
                **t.to_json(),
                "waiting_for_rate_limit": waits.get(t.run.run_id),
                "usage": usage.of_run(t.run.run_id).model_dump(mode="json"),
            }
            for t in timelines
        ],
        "pending_tool_calls": [call.model_dump(mode="json") for call in pending],
    }
    if with_messages:
        shown["messages"] = [m.model_dump(mode="json", exclude_none=True) for m in transcript]
    return shown


def _rate_limit_waits(database_url: str | None, run_ids: list[str]) -> dict[str, str]:
    """The running runs whose model call waits for a provider rate limit's admission, read from DBOS."""
    if not run_ids:
        return {}
    from dbos import DBOSClient

    from helix_dbos.runtime.launch import dbos_system_database_url
    from helix_dbos.runtime.rate_limits import rate_limit_waits

    system_url = dbos_system_database_url(existing_url(database_url))
    system_file = sqlite_path(system_url)
    if system_file is not None and not system_file.exists():
        return {}
    client = DBOSClient(system_database_url=system_url)
    try:
        return rate_limit_waits(client, run_ids)
    finally:
        client.destroy()


def _print_session(
    session: SessionRecord, timelines: list[RunTimeline], usage: _Usage, waits: dict[str, str], *, wide: bool
) -> None:
    console.print(f"[bold]session {session.session_id}[/bold]", soft_wrap=True)
    console.print(
        f"  agent {escape(session.agent_type)} · status {status_style(session.status)} · "
        f"{len(timelines)} run(s) · {session.message_count} messages",
        soft_wrap=True,
    )
    console.print(f"  created {local_time(session.created_at)} · updated {local_time(session.updated_at)}")
    source = session.forked_from
    if source is not None:
        console.print(
            f"  forked from session {source.get('session_id')} at checkpoint {source.get('checkpoint_id')}; "
            f"its own checkpoint there: {source.get('fork_checkpoint_id')}",
            soft_wrap=True,
            markup=False,
        )
    if session.error:
        console.print(f"  error: [red]{escape(session.error)}[/red]", soft_wrap=True)
    for timeline in timelines:
        _print_run(timeline, usage.of_run(timeline.run.run_id), waits.get(timeline.run.run_id), wide=wide)
    console.print(f"\nsession usage (sub-agents included): {_summary_text(usage.session)}", soft_wrap=True)


def _print_run(timeline: RunTimeline, usage: UsageSummary, waiting: str | None, *, wide: bool) -> None:
    run = timeline.run
    took = duration_text(timeline.duration_ms) if timeline.duration_ms is not None else "still running"
    console.print(
        f"\n[bold]run {run.run_id}[/bold]  turn {run.turn} · {run.mode} · {status_style(run.status)} · "
        f"started {local_time(run.started_at)} · took {took}",
        soft_wrap=True,
    )
    if run.previous_run_id:
        console.print(f"  after run {run.previous_run_id}", soft_wrap=True, markup=False)
    if waiting is not None:
        console.print(f"  waiting for rate limit {waiting}", soft_wrap=True, markup=False)
    if run.error:
        console.print(f"  error: [red]{escape(run.error)}[/red]", soft_wrap=True)
    table = Table("step", "committed", "took", "model", "in", "out", "cached", "cost", "tools", "checkpoint", box=None)
    for row in timeline.steps:
        step = row.usage
        table.add_row(
            str(row.step),
            local_time(row.committed_at) if row.checkpoint_id else "(discarded by a retry)",
            duration_text(row.duration_ms),
            escape(step.model or "-"),
            str(step.input_tokens) if step.llm_calls else "-",
            str(step.output_tokens) if step.llm_calls else "-",
            str(step.cached_input_tokens) if step.llm_calls else "-",
            _cost_text(step.cost_usd) if step.llm_calls else "-",
            escape(_tools_text(step.tool_calls)),
            row.checkpoint_id or "-",
        )
    if wide or fits(table):
        print_table(table)
    else:  # folded: the table is about 170 columns wide
        for row in timeline.steps:
            _print_step_folded(row)
    console.print(f"  run total: {_usage_text(totals([s.usage for s in timeline.steps]))}", soft_wrap=True)
    extra = _extra_text(usage)
    if extra:
        console.print(f"  {extra}", soft_wrap=True)


def _print_step_folded(row: Any) -> None:
    """A step on lines that fit the terminal: what and how long, then tokens and cost, then tools and checkpoint."""
    step = row.usage
    committed = local_time(row.committed_at) if row.checkpoint_id else "(discarded by a retry)"
    console.print(f"  step {row.step}  {committed} · took {duration_text(row.duration_ms)}", highlight=False)
    if step.llm_calls:
        console.print(
            f"    {escape(step.model or '-')} · in {step.input_tokens} · out {step.output_tokens} · "
            f"cached {step.cached_input_tokens} · {_cost_text(step.cost_usd)}",
            highlight=False,
        )
    if step.tool_calls:
        console.print(f"    tools: {escape(_tools_text(step.tool_calls))}", highlight=False)
    line = f"    checkpoint {row.checkpoint_id or '-'}"
    if len(line) > console.width:  # the id alone (it starts with cpv1-) rather than a wrapped line
        line = f"    {row.checkpoint_id}"
    console.print(line, soft_wrap=True, highlight=False)


def _tools_text(calls: list[ToolCallUsage]) -> str:
    """``get_weather x3 (0.1 ms), save_note (2.0 s, 1 failed)``: calls by tool, total time."""
    by_name: dict[str, list[ToolCallUsage]] = {}
    for call in calls:
        by_name.setdefault(call.name, []).append(call)
    parts = []
    for name, group in by_name.items():
        count = f" x{len(group)}" if len(group) > 1 else ""
        took = duration_text(sum(c.duration_ms or 0.0 for c in group))
        failed = sum(not c.success for c in group)
        parts.append(f"{name}{count} ({took}" + (f", {failed} failed)" if failed else ")"))
    return ", ".join(parts) or "-"


def _cost_text(cost: float | None) -> str:
    return "-" if cost is None else f"${cost:.6f}"


def _usage_text(total: dict[str, Any]) -> str:
    return (
        f"{total['llm_calls']} LLM call(s), {total['input_tokens']} input / {total['output_tokens']} output tokens "
        f"({total['cached_input_tokens']} cached, {total['reasoning_tokens']} reasoning), "
        f"{total['tool_calls']} tool call(s), cost {_cost_text(total['cost_usd'])}"
    )


def _summary_text(usage: UsageSummary) -> str:
    """A :class:`UsageSummary` on one line (what the API says, in words)."""
    unpriced = f" ({usage.unpriced_llm_calls} call(s) unpriced)" if usage.unpriced_llm_calls else ""
    text = (
        f"{usage.llm_calls} LLM call(s), {usage.input_tokens} input / {usage.output_tokens} output tokens "
        f"({usage.cached_input_tokens} cached, {usage.reasoning_tokens} reasoning), "
        f"{usage.tool_calls} tool call(s), cost {_cost_text(usage.cost_usd)}{unpriced}"
    )
    extra = _extra_text(usage)
    return f"{text}; {extra}" if extra else text


def _extra_text(usage: UsageSummary) -> str:
    """Failed-but-billed attempts and client waits, when there are any."""
    parts = []
    failed = usage.failed
    if failed.llm_calls:
        parts.append(
            f"{failed.llm_calls} failed attempt(s) billed apart: {failed.input_tokens} input / "
            f"{failed.output_tokens} output tokens, {_cost_text(failed.cost_usd)}"
        )
    if usage.client_tool_waits:
        parts.append(f"{usage.client_tool_waits} client wait(s), {duration_text(usage.client_tool_wait_ms)}")
    return "; ".join(parts)


def _print_transcript(transcript: list[Message], *, whole: bool) -> None:
    hint = "" if whole or not transcript else " (previews; --messages prints them whole)"
    console.print(f"\ntranscript: {len(transcript)} messages{hint}")
    for i, message in enumerate(transcript):
        body = message.model_dump_json(exclude_none=True, exclude={"role"})
        if not whole and len(body) > _PREVIEW_CHARS:
            body = body[:_PREVIEW_CHARS] + "…"
        console.print(f"  [{i}] {message.role}: {body}", soft_wrap=True, markup=False, highlight=False)


def _print_pending(pending: list[PendingToolCall]) -> None:
    if not pending:
        console.print("no pending tool calls or approvals")
        return
    table = Table("pending tool call", "tool", "kind", "arguments", "delivery", "deadline")
    for call in pending:
        table.add_row(
            escape(call.tool_call_id),
            escape(call.tool_name),
            call.kind,
            escape(compact_json(call.arguments)),
            call.delivery,
            local_time(call.deadline_ms),
        )
    print_table(table)
