"""Ephemeral sub-agent calls in a tool batch: start the children, await them, turn them into results.

A step's sub-agent calls run alongside its regular tools (the seeds' phase 1): :func:`start_sub_agents`
opens and starts every child first (``subagent_start`` on the parent's stream, then the child's
own chunks, mirrored), the batch then runs its regular tools, and :func:`await_sub_agents` waits for
each child in call order. The children thus run in parallel with each other and with the tools,
while every step the parent records comes in a deterministic order.

The child's validated output (its ``__finish__`` arguments, checked against its ``output_schema``)
is the call's result. Anything else - the child's session could not be opened, its workflow could
not start, it failed, it timed out, the parent was aborted - is a tool error the model sees, logged
as ``subagent.dispatch_failed``; the batch's other calls are unaffected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from helix_dbos.capability import RunCapability, RunEnd
from helix_dbos.orchestration.delegation import delegation_message, ended_run_message
from helix_dbos.orchestration.tool_batch import HitlKind, HitlRequest, ToolBatch
from helix_dbos.remote_sub_agent import is_remote_sub_agent_tool, remote_session_id_for
from helix_dbos.runtime.child_park import CHILD_PARK_PATCH, awaited_children, parking_enabled
from helix_dbos.runtime.children import ChildRun, await_child, open_child
from helix_dbos.runtime.ids import SCOPED_CALL_IDS_PATCH, child_session_id_for
from helix_dbos.runtime.step_outputs import ChildStartOutput, ChildWaitOutput, ToolStepOutput, empty_tool_output
from helix_dbos.session import SuspendedChildWait
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.stream.chunks import SubAgentEndChunk, SubAgentStartChunk
from helix_dbos.sub_agent import SubAgentTool
from helix_dbos.tool import is_sub_agent_tool_name, validation_error_message

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext

HITL_IN_EPHEMERAL_CHILD = (
    "Tool '{tool}' waits for a human (client-executed or approval-gated), which a sub-agent cannot do: "
    "nobody can answer it while the parent waits. Continue without it."
)
"""The result of a human-in-the-loop call made inside an ephemeral sub-agent (never a hang)."""


@dataclass(frozen=True)
class Delegation:
    """A sub-agent call whose child was opened (or failed to be): what the await needs."""

    call: ParsedToolCall
    tool: SubAgentTool
    opened: ChildStartOutput


_STILL_WAITING = ("running", "suspended_client_tool", "suspended_awaiting_children")
"""How a hot-window wait ends on a child that has not ended: the parent parks on it."""

CHILD_NOT_FOUND = "The sub-agent run this call started could not be found; it was not run again."
"""The result of a continuation's open sub-agent call whose child is gone (its session deleted)."""


def start_sub_agents(
    run: RunContext,
    calls: list[tuple[ParsedToolCall, SubAgentTool]],
    results: dict[str, ToolStepOutput],
    awaited: Mapping[str, ChildStartOutput | None] | None = None,
) -> list[Delegation]:
    """Announce and start every child, in call order; a call refused before starting gets its result now.

    ``awaited``: a continuation's calls whose child its previous run parked on (announced then): they
    are awaited again, never started twice (``None``: the child is gone, the call fails).
    """
    started: list[Delegation] = []
    for call, tool in calls:
        if awaited is not None and call.id in awaited:
            opened = awaited[call.id]
            if opened is None:
                results[call.id] = _failure(run, call, tool, CHILD_NOT_FOUND)
            else:
                started.append(Delegation(call, tool, opened))
            continue
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        key = run.call_key(call.id)
        run.emit(
            SubAgentStartChunk(
                **run.chunk_base(),
                sub_agent_id=child_session_id_for(run.who.session_id, key),
                sub_agent_type=tool.agent.name,
                tool_call_id=call.id,
                input=arguments,
            )
        )
        message = delegation_message(tool, arguments)
        if isinstance(message, ValidationError):
            results[call.id] = _failure(run, call, tool, validation_error_message(call.name, message))
            continue
        child = ChildRun(
            agent=tool.agent, tool_call_id=call.id, call_key=key, message=message, timeout_ms=tool.timeout_ms
        )
        started.append(Delegation(call, tool, open_child(run, child)))
    return started


def await_sub_agents(run: RunContext, delegations: list[Delegation], results: dict[str, ToolStepOutput]) -> None:
    """Wait for each started child (in call order) and record its result.

    Behind :data:`~.child_park.CHILD_PARK_PATCH` each wait lasts at most the hot window. When a child
    is still running then, the run parks (it joins ``run.awaiting_children``) and *none* of the
    batch's sub-agent calls gets its result now: the continuation awaits them all again (an ended
    child answers at once), so their results land in call order, as a parent waiting hot records them.
    """
    parking = bool(delegations) and run.children_may_park and parking_enabled(run)
    ended = [(d, await_child(run, d.opened, hot_window=parking)) for d in delegations]
    waiting = [d for d, e in ended if parking and e["status"] in _STILL_WAITING]
    if waiting:
        for d in waiting:
            wait = SuspendedChildWait(
                child_session_id=d.opened["session_id"],
                parent_tool_call_id=d.call.id,
                spawned_at=d.opened["started_at_ms"] or 0,
            )
            run.awaiting_children.append(wait.model_dump(mode="json"))
        return
    for d, e in ended:
        if e["status"] == "completed":
            results[d.call.id] = _success(d.call, e)
        else:
            results[d.call.id] = _failure(run, d.call, d.tool, _failure_message(d.tool, e), e)


def end_chunk(
    run: RunContext, call: ParsedToolCall, output: ToolStepOutput, child_session_id: str | None = None
) -> SubAgentEndChunk:
    """``subagent_end`` for a recorded result (in place of a tool's ``tool_end``).

    ``child_session_id``: the child a continuation awaited (its id derives from the parked run's turn).
    """
    agent_type = call.name.removeprefix("subagent__")
    tool = next((t for t in run.agent.tools if t.name == call.name), None)
    session_of = remote_session_id_for if is_remote_sub_agent_tool(tool) else child_session_id_for
    return SubAgentEndChunk(
        **run.chunk_base(),
        sub_agent_id=child_session_id or session_of(run.who.session_id, run.call_key(call.id)),
        sub_agent_type=agent_type,
        tool_call_id=call.id,
        result=output["result"] if output["success"] else None,
        error=None if output["success"] else output["error"],
    )


def refuse_hitl(run: RunContext, hitl: list[HitlRequest], results: dict[str, ToolStepOutput]) -> list[HitlRequest]:
    """In an ephemeral child, answer human-in-the-loop calls with an error; returns the calls left to wait on."""
    if run.request.child_mode != "ephemeral" or not hitl:
        return hitl
    for h in hitl:
        results[h.call.id] = {
            **empty_tool_output(h.call.id, h.call.name),
            "error": HITL_IN_EPHEMERAL_CHILD.format(tool=h.tool.name),
        }
    return []


def _failure_message(tool: SubAgentTool, ended: ChildWaitOutput) -> str:
    return ended_run_message(f"Sub-agent '{tool.agent.name}'", ended["status"], ended["error"])


def _success(call: ParsedToolCall, ended: ChildWaitOutput) -> ToolStepOutput:
    return {
        **empty_tool_output(call.id, call.name),
        "success": True,
        "result": ended["output"],
        "duration_ms": ended["duration_ms"],
    }


def _failure(
    run: RunContext,
    call: ParsedToolCall,
    tool: SubAgentTool,
    error: str,
    ended: ChildWaitOutput | None = None,
) -> ToolStepOutput:
    """A failed delegation: the model sees ``error``; operators see an ERROR ``subagent.dispatch_failed``.

    Logged from workflow code, so a replayed parent logs it again: a log line, not a side effect.
    """
    run.rt.logger.error(
        "subagent.dispatch_failed",
        {
            "session_id": run.who.session_id,
            "run_id": run.who.run_id,
            "tool_call_id": call.id,
            "sub_agent": tool.agent.name,
            "error": error,
        },
    )
    return {
        **empty_tool_output(call.id, call.name),
        "error": error,
        "duration_ms": ended["duration_ms"] if ended else 0.0,
    }


class SubAgentsCapability(RunCapability):
    """Ephemeral sub-agents on the seam: children started alongside the step's regular tools.

    Each ``subagent__*`` call opens a child workflow before the regular tools run and is awaited
    after them, so a ``finish_with`` call of the batch waits for the children. Its result is
    announced as ``subagent_end`` (local and remote alike). In an ephemeral child itself, calls that
    wait for a human are answered with an error: nobody watches a child's session.
    """

    name = "sub_agents"
    replay_patches = (SCOPED_CALL_IDS_PATCH, CHILD_PARK_PATCH)

    def __init__(self) -> None:
        self.awaited: dict[str, ChildStartOutput | None] = {}
        """A continuation's open calls whose child its previous run parked on (``None``: not found)."""

    def calls_left_pending(self, run: RunContext, calls: list[ParsedToolCall]) -> dict[str, HitlKind]:
        # Not a human's call: the children the previous run parked on, awaited by this batch.
        tools = {t.name: t for t in run.agent.tools if isinstance(t, SubAgentTool)}
        open_calls = [(c.id, tools[c.name].timeout_ms) for c in calls if c.name in tools]
        found = awaited_children(run, open_calls)
        self.awaited = {call_id: found.get(call_id) for call_id, _ in open_calls}
        return {}

    def on_start(self, run: RunContext) -> None:
        # A child whose tool has a timeout: its deadline is kept where it runs (its parent may be parked).
        request, deadlines = run.request, run.rt.child_deadlines
        if request.deadline_ms is not None and deadlines is not None:
            deadlines.watch(run.who.session_id, request.deadline_ms, request.timeout_ms, request.parent_session_id)

    def on_finish(self, run: RunContext, end: RunEnd) -> None:
        deadlines = run.rt.child_deadlines
        if run.request.deadline_ms is not None and deadlines is not None and not end.status.startswith("suspended"):
            deadlines.forget(run.who.session_id)

    def prepare_batch(self, run: RunContext, batch: ToolBatch, results: dict[str, ToolStepOutput]) -> None:
        batch.hitl = refuse_hitl(run, batch.hitl, results)

    def start_calls(self, run: RunContext, batch: ToolBatch, results: dict[str, ToolStepOutput]) -> list[Delegation]:
        return start_sub_agents(run, batch.sub_agents, results, self.awaited)

    def finish_calls(self, run: RunContext, started: object, results: dict[str, ToolStepOutput]) -> None:
        assert isinstance(started, list)
        await_sub_agents(run, started, results)

    def result_chunk(self, run: RunContext, call: ParsedToolCall, output: Mapping[str, Any]) -> SubAgentEndChunk | None:
        if not is_sub_agent_tool_name(call.name):
            return None
        awaited = self.awaited.get(call.id)
        return end_chunk(run, call, cast(ToolStepOutput, output), awaited["session_id"] if awaited else None)


__all__ = [
    "CHILD_NOT_FOUND",
    "HITL_IN_EPHEMERAL_CHILD",
    "Delegation",
    "SubAgentsCapability",
    "await_sub_agents",
    "end_chunk",
    "refuse_hitl",
    "start_sub_agents",
]
