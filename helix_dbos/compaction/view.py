"""The compacted view: what the model sees of a long transcript. Pure functions, no I/O.

A compaction is recorded as a :class:`CompactionState` (a step output), never as a rewrite of the
transcript. The view is a function of the transcript and that state alone, so a replay, or the
next call of a run, rebuilds exactly the messages the model saw::

    [system prompt] + [system messages of the dropped part] + [summary] + transcript[cut:]
                                                                          (old tool results cleared)

Invariants the functions keep (and the tests check):

- the system prompt is never dropped (nor a system message the caller put in the transcript);
- a cut never separates an assistant's tool calls (``__finish__`` included) from their results:
  the window never starts with a tool result;
- clearing replaces a tool result's content only; its message, id and pairing stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from helix_dbos.messages import AssistantMessage, Message, SystemMessage, ToolResultMessage

CompactionReason = Literal["tokens", "context_window"]
"""What triggered a compaction: the token threshold, or the provider refusing a call."""

CLEARED_TOOL_RESULT = "[tool result cleared to save context]"
"""The content a cleared tool result shows the model."""

SUMMARY_HEADER = "Summary of the earlier conversation (older messages are not shown):\n\n"
"""Opens the summary's system message."""


class CompactionState(BaseModel):
    """A compaction as it is recorded: which part of the transcript the model no longer sees verbatim."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    cut: int = 0
    """Transcript messages ``[0, cut)`` are replaced by the summary (or dropped without one)."""
    cleared_until: int = 0
    """Tool results at transcript positions ``[cut, cleared_until)`` show :data:`CLEARED_TOOL_RESULT`."""
    summary: str | None = None
    """The summary of ``[0, cut)`` (earlier summaries folded in), when the policy summarises."""
    transcript_length: int = 0
    """How long the transcript was when this compaction was made."""
    tokens_before: int = 0
    """The token count of the view that triggered it (0 when a refused call did)."""
    reason: CompactionReason = "tokens"
    summary_error: str | None = None
    """Why the summary call failed, if it did (the part is then dropped without a summary)."""


def plan_cut(transcript: Sequence[Message], keep_last: int | None, previous_cut: int) -> int:
    """Where the kept window starts: ``keep_last`` messages back, never on a tool result.

    Moved back onto the tool call whose results would otherwise start the window, so a call and its
    results are never split (never past ``previous_cut``: what was dropped stays dropped).
    """
    if keep_last is None:
        return previous_cut
    cut = max(previous_cut, len(transcript) - keep_last)
    while cut > previous_cut and isinstance(transcript[cut], ToolResultMessage):
        cut -= 1
    return cut


def plan_cleared_until(transcript: Sequence[Message], cut: int, keep_turns: int | None) -> int:
    """The position before which the kept window's tool results are cleared.

    The start of the ``keep_turns``-th last model turn that made tool calls (0: the whole window).
    """
    if keep_turns is None:
        return cut
    turns = [i for i in range(cut, len(transcript)) if _calls_tools(transcript[i])]
    if keep_turns == 0:
        return len(transcript)
    if len(turns) <= keep_turns:
        return cut
    return turns[-keep_turns]


def _calls_tools(message: Message) -> bool:
    return isinstance(message, AssistantMessage) and bool(message.tool_calls)


def compacted_view(built: Sequence[Message], transcript_length: int, state: CompactionState | None) -> list[Message]:
    """The messages the model sees: ``built`` (system prompt + transcript) with ``state`` applied.

    ``built`` is the loop's message list: the transcript, ``transcript_length`` messages, after the
    system prompt it may start with.
    """
    if state is None:
        return list(built)
    head = len(built) - transcript_length
    transcript = built[head:]
    cut = min(state.cut, len(transcript))
    kept_system = [m for m in transcript[:cut] if isinstance(m, SystemMessage)]
    summary = [SystemMessage(content=SUMMARY_HEADER + state.summary)] if state.summary else []
    window = [
        m.model_copy(update={"content": CLEARED_TOOL_RESULT})
        if isinstance(m, ToolResultMessage) and cut + i < state.cleared_until
        else m
        for i, m in enumerate(transcript[cut:])
    ]
    return [*built[:head], *kept_system, *summary, *window]


def applies_to(state: CompactionState | None, transcript_length: int) -> CompactionState | None:
    """``state`` if it can describe this transcript (a fork may have cut the transcript shorter)."""
    if state is None or state.cut > transcript_length or state.cleared_until > transcript_length:
        return None
    return state


def render_for_summary(messages: Sequence[Message], previous_summary: str | None) -> str:
    """The dropped part as plain text for the summariser (the previous summary folded in first)."""
    lines = [f"Earlier summary:\n{previous_summary}\n"] if previous_summary else []
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls or [])
            text = message.content or ""
            lines.append(f"assistant: {text}" + (f" [called {calls}]" if calls else ""))
        elif isinstance(message, ToolResultMessage):
            lines.append(f"tool {message.tool_name}: {message.content}")
        else:
            lines.append(f"{message.role}: {message.content}")
    return "\n".join(lines)


__all__ = [
    "CLEARED_TOOL_RESULT",
    "SUMMARY_HEADER",
    "CompactionReason",
    "CompactionState",
    "applies_to",
    "compacted_view",
    "plan_cleared_until",
    "plan_cut",
    "render_for_summary",
]
