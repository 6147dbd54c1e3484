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

from helix_dbos.capability import RunCapability
from helix_dbos.orchestration.delegation import delegation_message, ended_run_message
from helix_dbos.orchestration.tool_batch import HitlRequest, ToolBatch
from helix_dbos.remote_sub_agent import is_remote_sub_agent_tool, remote_session_id_for
from helix_dbos.runtime.children import ChildRun, await_child, open_child
from helix_dbos.runtime.ids import SCOPED_CALL_IDS_PATCH, child_session_id_for
from helix_dbos.runtime.step_outputs import ChildStartOutput, ChildWaitOutput, ToolStepOutput, empty_tool_output
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


def start_sub_agents(
    run: RunContext, calls: list[tuple[ParsedToolCall, SubAgentTool]], results: dict[str, ToolStepOutput]
) -> list[Delegation]:
    """Announce and start every child, in call order; a call refused before starting gets its result now."""
    started: list[Delegation] = []
    for call, tool in calls:
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
    """Wait for each started child (in call order) and record its result."""
    for d in delegations:
        ended = await_child(run, d.opened)
        if ended["status"] == "completed":
            results[d.call.id] = _success(d.call, ended)
        else:
            results[d.call.id] = _failure(run, d.call, d.tool, _failure_message(d.tool, ended), ended)


def end_chunk(run: RunContext, call: ParsedToolCall, output: ToolStepOutput) -> SubAgentEndChunk:
    """``subagent_end`` for a recorded result (in place of a tool's ``tool_end``)."""
    agent_type = call.name.removeprefix("subagent__")
    tool = next((t for t in run.agent.tools if t.name == call.name), None)
    session_of = remote_session_id_for if is_remote_sub_agent_tool(tool) else child_session_id_for
    return SubAgentEndChunk(
        **run.chunk_base(),
        sub_agent_id=session_of(run.who.session_id, run.call_key(call.id)),
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
    replay_patches = (SCOPED_CALL_IDS_PATCH,)

    def prepare_batch(self, run: RunContext, batch: ToolBatch, results: dict[str, ToolStepOutput]) -> None:
        batch.hitl = refuse_hitl(run, batch.hitl, results)

    def start_calls(self, run: RunContext, batch: ToolBatch, results: dict[str, ToolStepOutput]) -> list[Delegation]:
        return start_sub_agents(run, batch.sub_agents, results)

    def finish_calls(self, run: RunContext, started: object, results: dict[str, ToolStepOutput]) -> None:
        assert isinstance(started, list)
        await_sub_agents(run, started, results)

    def result_chunk(self, run: RunContext, call: ParsedToolCall, output: Mapping[str, Any]) -> SubAgentEndChunk | None:
        if not is_sub_agent_tool_name(call.name):
            return None
        return end_chunk(run, call, cast(ToolStepOutput, output))


__all__ = [
    "HITL_IN_EPHEMERAL_CHILD",
    "Delegation",
    "SubAgentsCapability",
    "await_sub_agents",
    "end_chunk",
    "refuse_hitl",
    "start_sub_agents",
]
