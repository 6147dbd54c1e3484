"""Split one step's tool calls into the phases the seeds run them in. Pure: no I/O, no clock.

- **rejected**: an unknown tool, a tool with nothing to execute, or arguments that were not an
  object; answered with an error, never run;
- **regular**: server tools, run in parallel from the same state, merged by the seeds' contract;
- **sub_agents**: sub-agent calls (``subagent__*``), run as child agents alongside the regular
  tools (phase 1 in the seeds' order); their results come before any ``finish_with`` completes;
- **hitl**: calls a human answers (client-executed tools, approval-gated tools), awaited meanwhile;
- **companion**: ``companion__*`` calls, a phase of their own (seeds 001 "Tool Execution Order"),
  run one after another after the regular tools, before the finishing ones;
- **finishing**: ``finish_with`` tools, run one after another on the merged state; the first
  success completes the agent.

Every list keeps the calls' input order: the runtime takes one DBOS step per call in that order,
and a replayed run must take them in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from helix_dbos.companion_tools import CompanionTool
from helix_dbos.remote_sub_agent import RemoteSubAgentTool
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.sub_agent import SubAgentTool
from helix_dbos.tool import Tool

HitlKind = Literal["client", "approval", "rerun"]
"""``rerun``: an operator decides whether a not-retry-safe call whose outcome is unknown runs again."""

_MAX_NAME_IN_MESSAGE = 200


@dataclass(frozen=True)
class HitlRequest:
    """A call a human answers: ``client`` (the front end runs it) or ``approval`` (a user allows it)."""

    call: ParsedToolCall
    tool: Tool
    kind: HitlKind
    held_result: dict[str, Any] | None = None
    """The result the call already produced, when a person is asked about that result (a guardrail's
    ``approve``): approved, it is the call's result and the call does not run again."""


@dataclass
class ToolBatch:
    """A step's tool calls by phase (see the module docstring)."""

    regular: list[tuple[ParsedToolCall, Tool]] = field(default_factory=list)
    sub_agents: list[tuple[ParsedToolCall, SubAgentTool]] = field(default_factory=list)
    remote_sub_agents: list[tuple[ParsedToolCall, RemoteSubAgentTool]] = field(default_factory=list)
    """Remote sub-agent calls: started and awaited alongside the ephemeral ones."""
    hitl: list[HitlRequest] = field(default_factory=list)
    finishing: list[tuple[ParsedToolCall, Tool]] = field(default_factory=list)
    companion: list[tuple[ParsedToolCall, CompanionTool]] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    """Call id -> the error the call is answered with."""
    closed_pending: list[str] = field(default_factory=list)
    """Ids of rejected calls that were pending (a continuation's unknown tool): the error answers them."""


def unknown_tool_message(name: str, tools_by_name: Mapping[str, Tool]) -> str:
    """The error for a call of a tool the agent does not have (names the ones it has)."""
    available = (
        ", ".join(sorted(n for n, t in tools_by_name.items() if t.execute is not None or isinstance(t, CompanionTool)))
        or "none"
    )
    shown = name if len(name) <= _MAX_NAME_IN_MESSAGE else name[:_MAX_NAME_IN_MESSAGE] + "..."
    return f"Unknown tool '{shown}'. Available tools: {available}."


def split_tool_batch(
    calls: Sequence[ParsedToolCall],
    tools_by_name: Mapping[str, Tool],
    *,
    requires_approval: Callable[[ParsedToolCall, Tool], bool],
    pending_kinds: Mapping[str, HitlKind] | None = None,
    invalid_arguments: Mapping[str, str] | None = None,
) -> ToolBatch:
    """Assign each call to its phase.

    ``pending_kinds`` (call id -> kind) are calls already registered as pending by the run that
    suspended on this batch: they stay human-answered whatever their tool says now.
    ``invalid_arguments`` (call id -> message) are calls whose arguments were not an object.
    ``requires_approval`` decides a gated tool's call (``require_approval`` not ``False``); it is
    called once per such call, in call order, and only for those (the runtime checkpoints a
    predicate gate as a step, so which calls reach it, and in what order, is part of the run).
    """
    pending = pending_kinds or {}
    invalid = invalid_arguments or {}
    batch = ToolBatch()
    for call in calls:
        tool = tools_by_name.get(call.name)
        if tool is None:
            batch.rejected[call.id] = unknown_tool_message(call.name, tools_by_name)
            if call.id in pending:
                batch.closed_pending.append(call.id)
        elif call.id in invalid:
            batch.rejected[call.id] = invalid[call.id]
        elif isinstance(tool, SubAgentTool):
            batch.sub_agents.append((call, tool))
        elif isinstance(tool, RemoteSubAgentTool):
            batch.remote_sub_agents.append((call, tool))
        elif call.id in pending:
            batch.hitl.append(HitlRequest(call, tool, pending[call.id]))
        elif isinstance(tool, CompanionTool):
            batch.companion.append((call, tool))
        elif tool.is_client:
            batch.hitl.append(HitlRequest(call, tool, "client"))
        elif tool.execute is None:
            batch.rejected[call.id] = unknown_tool_message(call.name, tools_by_name)
        elif tool.finish_with:
            batch.finishing.append((call, tool))
        elif tool.require_approval is not False and requires_approval(call, tool):
            batch.hitl.append(HitlRequest(call, tool, "approval"))
        else:
            batch.regular.append((call, tool))
    return batch


__all__ = ["HitlKind", "HitlRequest", "ToolBatch", "split_tool_batch", "unknown_tool_message"]
