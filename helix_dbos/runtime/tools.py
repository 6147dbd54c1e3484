"""A step's tool calls inside the workflow: the seeds' phases, the HITL batch, the results.

Phase 1 runs the regular server tools in parallel, each its own DBOS step, all seeded from the
same state and merged by the seeds' contract (appends compose, replaces are last-write-wins).
The capabilities' calls run in phase 1 too (:mod:`helix_dbos.capability`: ``start_calls`` before
the tools, ``finish_calls`` after them; sub-agents and remote sub-agents), so a ``finish_with``
waits for them. Human-in-the-loop calls are the capabilities' too: ``calls_left_pending`` and
``gates_call`` shape the split, ``register_calls`` records them after the batch's ``tool_start``,
and ``collect_answers`` (after ``finish_calls``) waits for their answers, may stop the batch, and
hands back the approved calls, which then run as steps. Then the capabilities' ``after_human_calls``
(companion calls, ``companion__*``).
Then the calls of not-retry-safe tools whose outcome a recovered run found unknown go to an
operator as ``rerun`` approvals (:mod:`helix_dbos.runtime.unknown_outcomes`, through the run's
human-in-the-loop capability); approved ones run once more. That module also writes the crash
marker (``{agent}.tool_starts``) in front of a phase's not-retry-safe tool steps: it is part of how
a tool step runs, not a feature a capability could turn off.
Phase 2 runs the finish_with tools one after another on the merged state: the first success
completes the agent, and later finish_with calls of the batch are not executed.

Which call goes to which phase is decided by the pure :func:`split_tool_batch`; this module does
the steps, the stream chunks and the transcript. Results are recorded in the calls' input order.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dbos import DBOS, StepOptions

from helix_dbos.capability import BatchStop, CollectedAnswers
from helix_dbos.messages import AssistantMessage, Message, ToolResultMessage
from helix_dbos.orchestration.message_builder import create_tool_result_message
from helix_dbos.orchestration.tool_batch import HitlKind, ToolBatch, split_tool_batch
from helix_dbos.runtime import step_names
from helix_dbos.runtime.hooks import ToolHookPayload
from helix_dbos.runtime.ids import REUSED_CALL_IDS_PATCH, calls_used_before, scoped_call_key
from helix_dbos.runtime.step_outputs import ToolStepOutput
from helix_dbos.runtime.steps import ToolStepRequest, tool_step
from helix_dbos.runtime.unknown_outcomes import mark_starts, settle_unknown_outcomes
from helix_dbos.state.tracker import StepWritesAdapter, merge_step_writes
from helix_dbos.step_result import ParsedSubAgentCall, ParsedToolCall
from helix_dbos.store.base import UsageRecord
from helix_dbos.stream.chunks import CustomEventChunk, StatePatchChunk, ToolEndChunk, ToolStartChunk
from helix_dbos.tool import FINISH_TOOL_NAME, SUBAGENT_TOOL_PREFIX, Tool

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext


@dataclass
class BatchOutcome:
    """How a batch of tool calls ended."""

    winner: ToolStepOutput | None = None
    """The output of the finish_with call that completed the agent, if one did."""
    stop: BatchStop | None = None
    pending_ids: list[str] = field(default_factory=list)


Results = dict[str, ToolStepOutput]
"""Tool results by call id, filled phase by phase."""


def execute_tools(
    run: RunContext,
    calls: list[ParsedToolCall],
    tools_by_name: dict[str, Tool],
    *,
    resuming: bool = False,
    invalid_arguments: dict[str, str] | None = None,
) -> BatchOutcome:
    """Run a batch of tool calls in the seeds' phase order (see the module docstring).

    ``resuming`` answers the batch a suspended run left behind (its calls already streamed).
    ``invalid_arguments`` (call id -> message) are calls whose arguments were not an object: they
    are answered with that error, never run on the ``{}`` they were coerced to.
    """
    pending_kinds: dict[str, HitlKind] = {}
    if resuming:  # a continuation's first look at the batch its previous run suspended on
        for capability in run.capabilities_at("calls_left_pending"):
            pending_kinds.update(capability.calls_left_pending(run, calls))
    gating = run.capabilities_at("gates_call")
    batch = split_tool_batch(
        calls,
        tools_by_name,
        requires_approval=lambda call, tool: any(c.gates_call(run, call, tool) for c in gating),
        pending_kinds=pending_kinds,
        invalid_arguments=invalid_arguments,
    )
    run.applied_pending.extend(batch.closed_pending)  # never left open: the call has its result now
    results: Results = {c.id: error_result(c, batch.rejected[c.id]) for c in calls if c.id in batch.rejected}
    for capability in run.capabilities_at("prepare_batch"):
        capability.prepare_batch(run, batch, results)
    if not resuming:
        _announce_starts(run, calls, batch)
    registered = [(c, c.register_calls(run, batch, resuming=resuming)) for c in run.capabilities_at("register_calls")]

    started = [(c, c.start_calls(run, batch, results)) for c in run.capabilities_at("start_calls")]  # phase 1
    _run_phase(run, batch.regular, results)
    for capability, handle in started:
        if handle is not None:
            capability.finish_calls(run, handle, results)
    for capability, registration in registered:
        if registration is None:
            continue
        answers = capability.collect_answers(run, registration, results)
        if answers.stop is not None:
            return _stopped(run, calls, results, answers)
        _run_phase(run, answers.run_as_steps, results)  # e.g. approved calls
    unknown = settle_unknown_outcomes(run, calls, tools_by_name, results, _run_phase)
    if unknown.stop is not None:
        return _stopped(run, calls, results, unknown)
    for capability in run.capabilities_at("after_human_calls"):
        capability.after_human_calls(run, batch, results)
    if run.awaiting_children:  # a blocking companion waits on a human: park, leave its call open
        return _stopped(run, calls, results, CollectedAnswers(stop="awaiting_children"))
    winner = _run_finishing(run, batch.finishing, results)

    for call in calls:  # messages, chunks and deferred hooks in input order
        _record_tool_result(run, call, results[call.id])
    return BatchOutcome(winner=winner)


def _stopped(run: RunContext, calls: list[ParsedToolCall], results: Results, answers: CollectedAnswers) -> BatchOutcome:
    """The batch stops waiting for answers: record what did run; the calls still waiting stay open."""
    for call in calls:
        if call.id in results:
            _record_tool_result(run, call, results[call.id])
    assert answers.stop is not None
    return BatchOutcome(stop=answers.stop, pending_ids=list(answers.pending_ids))


def outstanding_calls(messages: list[Message]) -> list[ParsedToolCall]:
    """Workflow code: calls of the last assistant message that have no result yet (a suspended batch).

    A call is answered by a result after that message: an earlier result with the same id answered
    an earlier call that used the id. Runs recorded before :data:`REUSED_CALL_IDS_PATCH` counted a
    result anywhere in the transcript; where the two readings differ (only then), the patch decides,
    so such a run replays the steps it took.
    """
    at = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AssistantMessage)), None)
    if at is None:
        return []
    last = messages[at]
    assert isinstance(last, AssistantMessage)
    if not last.tool_calls:
        return []
    answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolResultMessage)}
    recorded_before = answered | {m.tool_call_id for m in messages[:at] if isinstance(m, ToolResultMessage)}
    calls = [c for c in last.tool_calls if c.name != FINISH_TOOL_NAME]
    if any(c.id in recorded_before and c.id not in answered for c in calls) and not DBOS.patch(REUSED_CALL_IDS_PATCH):
        answered = recorded_before
    return [ParsedToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls if c.id not in answered]


def sub_agent_tool_calls(calls: list[ParsedSubAgentCall]) -> list[ParsedToolCall]:
    """Sub-agent calls as the tool calls the transcript stores them as (``subagent__{agent}``)."""
    return [ParsedToolCall(id=c.id, name=f"{SUBAGENT_TOOL_PREFIX}{c.agent_type}", arguments=c.input) for c in calls]


def error_result(call: ParsedToolCall, error: str | None) -> ToolStepOutput:
    """A failed result the loop makes itself (no step ran): same shape as a tool step's output."""
    return {
        "tool_call_id": call.id,
        "tool_name": call.name,
        "success": False,
        "result": None,
        "error": error,
        "writes": {"ops": [], "warnings": []},
        "patches": [],
        "events": [],
        "duration_ms": 0.0,
        "finish_output": None,
        "transform_error": None,
    }


# --- phases -----------------------------------------------------------------------------------------


def _announce_starts(run: RunContext, calls: list[ParsedToolCall], batch: ToolBatch) -> None:
    """``tool_start`` for every call that is not human-answered, in input order.

    A human-in-the-loop call's ``tool_start`` goes out after the call is registered (``register_calls``),
    so a client that answers as soon as it sees ``tool_start`` always finds its pending call.
    """
    waiting = {h.call.id for h in batch.hitl} | {call.id for call, _ in [*batch.sub_agents, *batch.remote_sub_agents]}
    for call in calls:
        if call.id not in waiting:
            run.emit(_tool_start(run, call))


def _run_finishing(
    run: RunContext, finishing: list[tuple[ParsedToolCall, Tool]], results: Results
) -> ToolStepOutput | None:
    """Phase 2: finish_with calls one by one on the merged state; returns the one that completed the agent."""
    winner: ToolStepOutput | None = None
    for call, tool in finishing:
        if winner is not None:
            results[call.id] = error_result(
                call, f"Not executed: the agent already completed via '{winner['tool_name']}'."
            )
            continue
        (output,) = _run_phase(run, [(call, tool)], results)
        if output["success"] or output.get("transform_error"):
            winner = output
    return winner


def _run_phase(run: RunContext, batch: list[tuple[ParsedToolCall, Tool]], results: Results) -> list[ToolStepOutput]:
    """Run ``batch`` from the current state, merge their writes into it, and record their results."""
    base = dict(run.custom_state)
    outputs = _run_tool_steps(run, batch, base)
    _merge_into_run(run, base, outputs)
    for output in outputs:
        results[output["tool_call_id"]] = output
    return outputs


def _run_tool_steps(
    run: RunContext, batch: list[tuple[ParsedToolCall, Tool]], base_state: dict[str, Any]
) -> list[ToolStepOutput]:
    """Each call is its own DBOS step; several run concurrently on reserved, ordered step ids."""
    reused = calls_used_before(run.messages, [call.id for call, _ in batch])
    requests = [
        ToolStepRequest(
            run.who,
            tool,
            call,
            base_state,
            run.hooks,
            # The bare call id while it names one call in the session (so every call of a run recorded
            # before keeps its key); scoped when an earlier call used it. The transcript decides,
            # and a replay reads the same one: no patch needed.
            call_key=scoped_call_key(call.id, turn=run.request.turn, step=run.step) if call.id in reused else None,
        )
        for call, tool in batch
    ]
    requests = mark_starts(run, requests)  # not-retry-safe calls: their crash marker first
    options: list[StepOptions] = [{"name": step_names.tool(run.agent.name, r.tool.name)} for r in requests]
    if len(requests) <= 1:
        return [DBOS.run_step(options[i], tool_step, r) for i, r in enumerate(requests)]
    reservations = [DBOS.reserve_step() for _ in requests]

    def run_reserved(i: int) -> ToolStepOutput:
        return reservations[i].run(options[i], tool_step, requests[i])

    futures = [run.rt.tool_pool.submit(contextvars.copy_context().run, run_reserved, i) for i in range(len(requests))]
    return [future.result() for future in futures]


def _merge_into_run(run: RunContext, base: dict[str, Any], outputs: list[ToolStepOutput]) -> None:
    if not outputs:
        return
    merged, warnings = merge_step_writes(base, [StepWritesAdapter.validate_python(o["writes"]) for o in outputs])
    for warning in warnings:
        run.rt.logger.warn(f"[helix-dbos] state merge: {warning}", {"run_id": run.who.run_id})
    run.custom_state = merged


# --- chunks and results -----------------------------------------------------------------------------


def _tool_start(run: RunContext, call: ParsedToolCall) -> ToolStartChunk:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    return ToolStartChunk(**run.chunk_base(), tool_call_id=call.id, tool_name=call.name, arguments=arguments)


def _record_tool_result(run: RunContext, call: ParsedToolCall, output: ToolStepOutput) -> None:
    """The result's events and state patch, its transcript message, ``tool_end``, usage and hook."""
    for event in output["events"]:
        run.emit(CustomEventChunk(**run.chunk_base(), event_name=event["event_name"], data=event["data"]))
    if output["patches"]:
        run.emit(StatePatchChunk(**run.chunk_base(), patches=output["patches"]))
    success = bool(output["success"])
    message = create_tool_result_message(
        tool_call_id=call.id,
        tool_name=call.name,
        result=output["result"],
        success=success,
        error=output["error"],
    )
    if output.get("outcome_unknown"):  # what the inspector's badge and API readers key on
        unknown = {"outcome_unknown": True, "idempotency_key": output.get("idempotency_key")}
        message = message.model_copy(update={"metadata": {**(message.metadata or {}), **unknown}})
    run.append(message)
    announcers = run.capabilities_at("result_chunk")
    announced = next((c for c in (k.result_chunk(run, call, output) for k in announcers) if c), None)
    if announced is not None:
        run.emit(announced)  # e.g. subagent_end: its subagent_start went out at dispatch
    else:
        run.emit(
            ToolEndChunk(
                **run.chunk_base(),
                tool_call_id=call.id,
                tool_name=call.name,
                result=output["result"],
                error=output["error"],
                success=success,
            )
        )
    run.pending_usage.append(
        UsageRecord(kind="tool", name=call.name, step=run.step, value=output["duration_ms"], success=success)
    )
    if run.wants("after_tool") and output.get("after_tool", True):
        run.deferred_hooks.append(("after_tool", _after_tool_payload(run, call, output, success)))


def _after_tool_payload(
    run: RunContext, call: ParsedToolCall, output: ToolStepOutput, success: bool
) -> ToolHookPayload:
    return ToolHookPayload(
        run.who.session_id,
        run.who.run_id,
        run.agent.name,
        call.id,
        call.name,
        call.arguments if isinstance(call.arguments, dict) else {},
        success=success,
        result=output["result"],
        error=output["error"],
        duration_ms=output["duration_ms"],
    )


__all__ = ["BatchOutcome", "BatchStop", "error_result", "execute_tools", "outstanding_calls", "sub_agent_tool_calls"]
