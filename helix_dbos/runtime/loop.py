"""The agent loop as DBOS workflow code: build messages -> LLM step -> plan -> tools -> stop check.

Everything here runs inside the ``helix_dbos.agent_run`` workflow and must be deterministic on
replay: decisions come from the pure orchestration functions and from checkpointed step outputs,
never from a clock or a fresh read of mutable data. (The transcript prefix read at the start is
immutable while the run is active, so reading it again on replay returns the same messages.)

This module is the driver only: one iteration per model call, and how a run ends. A step's tool
calls are run by :mod:`helix_dbos.runtime.tools`; the run's in-memory state is a
:class:`~helix_dbos.runtime.run_context.RunContext`. Features (skills, budgets, memory, companions,
sub-agents, an agent's own) are capabilities (:mod:`helix_dbos.capability`): the driver calls
every capability of the run at its named points and knows none of them by name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dbos import DBOS

from helix_dbos.agent import AgentConfig
from helix_dbos.capability import RunCapability, RunEnd
from helix_dbos.errors import DefinitionError, RunParked, extract_error_message, public_error_message
from helix_dbos.observability.run_observer import RunInfo, observe_run
from helix_dbos.observability.run_observer import current as observe_current
from helix_dbos.orchestration.message_builder import (
    SKIPPED_BY_FINISH_MESSAGE,
    create_assistant_message,
    create_finish_reminder_message,
    create_max_tokens_correction_message,
    create_tool_result_message,
    synthesize_finish_tool_result,
)
from helix_dbos.orchestration.output_modes import create_output_correction_message, plan_direct_output
from helix_dbos.orchestration.state_operations import (
    build_agent_messages_for_llm,
    build_effective_tools,
    completion_tool_name,
)
from helix_dbos.orchestration.step_processor import (
    StepProcessingPlan,
    plan_step_processing,
    tool_call_argument_errors,
)
from helix_dbos.orchestration.stop_checker import (
    StopConfig,
    determine_final_status,
    needs_finish_reminder,
    needs_max_tokens_recovery,
    should_stop_execution,
)
from helix_dbos.runtime import services, step_names
from helix_dbos.runtime.exiting import raise_if_exiting
from helix_dbos.runtime.hooks import RunPayload
from helix_dbos.runtime.resumes import fire_resumed_at_start
from helix_dbos.runtime.run_context import FinalStatus, RunContext, RunRequest, RunSummary
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.step_outputs import FinalizeStepOutput, LLMStepOutput
from helix_dbos.runtime.steps import fail_run_step, finalize_step, hooks_step, llm_step
from helix_dbos.runtime.tools import BatchOutcome, execute_tools, outstanding_calls, sub_agent_tool_calls
from helix_dbos.session import SessionStatus
from helix_dbos.step_result import (
    ErrorStepResult,
    ParsedToolCall,
    StepResult,
    StepResultAdapter,
    TextStepResult,
    TokenUsage,
)
from helix_dbos.store.base import StepCommit, UsageRecord
from helix_dbos.stream.chunks import ErrorChunk, OutputChunk, RunInterruptedChunk
from helix_dbos.tool import Tool, is_sub_agent_tool_name

_log = logging.getLogger("helix_dbos.runtime.loop")


@dataclass(frozen=True)
class _Toolbox:
    """What the agent's definition fixes for the whole run: its tools and when it stops."""

    tools: list[Tool]
    by_name: dict[str, Tool]
    finish_name: str | None
    stop_config: StopConfig
    skills_fragment: str = ""
    """The skills catalog resolved (in a step) for this run; the same bytes on every LLM call."""

    @classmethod
    def of(cls, agent: AgentConfig, skills_fragment: str = "", added: Sequence[Tool] = ()) -> _Toolbox:
        """``added``: the capabilities' tools for this run (``run_tools``); a name taken twice is refused."""
        tools = build_effective_tools(agent)
        names = {t.name for t in tools}
        for tool in added:
            if tool.name in names:
                raise DefinitionError(f"agent {agent.name!r}: two tools of the run are named {tool.name!r}")
            names.add(tool.name)
        tools.extend(added)
        return cls(
            tools=tools,
            by_name={t.name: t for t in tools},
            finish_name=completion_tool_name(agent),
            stop_config=StopConfig(max_steps=agent.max_steps, stop_when=agent.stop_when),
            skills_fragment=skills_fragment,
        )


def run_agent_loop(request: RunRequest) -> RunSummary:
    """Run (or, under replay, re-run deterministically) one agent run to its end, observed.

    The run's spans and lifecycle logs (:mod:`helix_dbos.observability`) only observe: nothing
    here decides anything from them.
    """
    with observe_run(_run_info(request)) as observer:
        try:
            summary = _run_observed(request)
        except RunParked:
            observer.close("parked")  # waiting for a provider's admission, which resumes it
            raise
        except BaseException:
            observer.close("abandoned")  # cancelled, or this process is exiting: recovery continues the trace
            raise
        observer.close(summary.status, error=summary.error, pending_ids=summary.pending_tool_call_ids)
        return summary


def _run_info(request: RunRequest) -> RunInfo:
    agent = services.current().registry.get(request.agent_name)
    return RunInfo(
        session_id=request.session_id,
        run_id=request.run_id,
        agent=request.agent_name,
        model=agent.llm_config.model if agent is not None else "",
        turn=request.turn,
        mode=request.mode,
        previous_run_id=request.previous_run_id,
        workflow_id=request.workflow_id,
    )


def _run_observed(request: RunRequest) -> RunSummary:
    """The run, with its failure recorded when something unexpected escapes the loop.

    An unexpected exception (a bug, an unregistered agent, an error DBOS raised in workflow code)
    must not leave the session ``active`` forever: it is recorded as a failed run, in a step, and
    reported as the run's error. DBOS's control exceptions (cancellation, lost ownership) are
    ``BaseException``s and pass through untouched, like :class:`~helix_dbos.errors.ProcessExiting`.
    """
    try:
        return _run_loop(request)
    except Exception as exc:
        raise_if_exiting(exc)
        _log.error("run %s failed", request.run_id, exc_info=exc)
        error = public_error_message(exc)  # what clients see; the driver's details stay in the log
        DBOS.run_step({"name": step_names.FAIL_RUN}, fail_run_step, request.session_id, request.run_id, error)
        rt = services.current()
        rt.streams.fail(request.stream_id, error)
        return RunSummary(session_id=request.session_id, run_id=request.run_id, status="failed", error=error)


def _run_loop(request: RunRequest) -> RunSummary:
    rt = services.current()
    run = _open_run(rt, request)
    fragment = "".join(c.system_fragment(run) for c in run.capabilities_at("system_fragment"))
    toolbox = _Toolbox.of(run.agent, fragment, [t for c in run.capabilities_at("run_tools") for t in c.run_tools(run)])
    _fire_agent_start(run)
    ended = _first_end(run, "on_start", lambda c: c.on_start(run))
    if ended is not None:
        return ended
    fire_resumed_at_start(run)
    early = _answer_outstanding(run, toolbox)
    if early is None:
        early = _first_end(run, "after_outstanding", lambda c: c.after_outstanding(run))
    if early is not None:
        return early
    for message in request.resume_messages:
        run.append(message)
    ended = _first_end(run, "between_steps", lambda c: c.between_steps(run))
    if ended is not None:
        return ended
    for capability in run.capabilities_at("before_first_model_call"):
        capability.before_first_model_call(run)
    # Step 0's commit is the run's genesis checkpoint, and reading the interrupt flag with it means
    # an interrupt that arrives before the first model call is honoured too.
    pending: StepCommit | None = run.pending_commit()

    while True:
        run.step += 1
        for capability in run.capabilities_at("before_model_call"):
            capability.before_model_call(run)
        out = _call_model(run, toolbox, pending)
        pending = None
        run.emit_checkpoint(out.get("commit"), run.step - 1)
        if out["interrupted"]:
            run.step -= 1
            return _finish(run, "interrupted", error=None, reason=out.get("interrupt_reason"))
        step_result = StepResultAdapter.validate_python(out["step_result"])
        _record_llm_usage(run, step_result, out.get("duration_ms"))
        if isinstance(step_result, ErrorStepResult) and _retry_wanted(run, step_result):
            out = _call_model(run, toolbox, None)  # the same step, once more (a compaction made it smaller)
            step_result = StepResultAdapter.validate_python(out["step_result"])
            _record_llm_usage(run, step_result, out.get("duration_ms"))
        for capability in run.capabilities_at("after_model_call"):
            capability.after_model_call(run, step_result)
        plan = _plan(run, step_result)
        ended = _process_step(run, toolbox, step_result, plan)
        if ended is not None:
            return ended
        if not _append_correction(run, toolbox, step_result, plan) and should_stop_execution(
            step_result, run.step, toolbox.stop_config
        ):
            return _stop(run, step_result, toolbox.finish_name)
        ended = _first_end(run, "between_steps", lambda c: c.between_steps(run))
        if ended is not None:
            return ended
        pending = run.pending_commit()


def _retry_wanted(run: RunContext, failed: ErrorStepResult) -> bool:
    """Whether a capability makes the failed call again (the first that says so; at most once a step)."""
    return any(c.retry_model_call(run, failed) for c in run.capabilities_at("retry_model_call"))


def _first_end(run: RunContext, name: str, point: Callable[[RunCapability], RunEnd | None]) -> RunSummary | None:
    """Call ``point`` (named ``name``) on each capability in order until one ends the run; then finish it so."""
    for capability in run.capabilities_at(name):
        end = point(capability)
        if end is not None:
            return _finish_as(run, end)
    return None


def _finish_as(run: RunContext, end: RunEnd) -> RunSummary:
    return _finish(
        run, end.status, output=end.output, error=end.error, reason=end.reason, pending_ids=end.pending_ids or None
    )


def _open_run(rt: RuntimeServices, request: RunRequest) -> RunContext:
    """Resolve the agent (warning when its definition changed) and rebuild the run's state."""
    agent = rt.registry.require(request.agent_name)
    fingerprint = rt.registry.fingerprint(agent.name)
    if request.fingerprint and fingerprint != request.fingerprint:
        rt.logger.warn(
            "[helix-dbos] agent definition changed since this run started; continuing with the current one",
            {
                "agent": agent.name,
                "run_id": request.run_id,
                "recorded": request.fingerprint,
                "current": fingerprint,
            },
        )
    messages = rt.store.get_message_prefix(request.session_id, request.start_message_count)
    return RunContext(rt, agent, request, messages)


def _fire_agent_start(run: RunContext) -> None:
    """``on_agent_start``, in its own step only when defined: recovery must not fire it again."""
    if not run.wants("on_agent_start"):
        return
    request = run.request
    start = RunPayload(
        run.who.session_id,
        run.who.run_id,
        run.agent.name,
        "running",
        previous_run_id=request.previous_run_id,
        extra={"mode": request.mode, "turn": request.turn},
    )
    DBOS.run_step(
        {"name": step_names.hooks(run.agent.name)}, hooks_step, run.who, run.hooks, [("on_agent_start", start)]
    )


def _answer_outstanding(run: RunContext, toolbox: _Toolbox) -> RunSummary | None:
    """A continuation first answers the batch the previous run suspended on; ends the run if that does."""
    outstanding = outstanding_calls(run.messages)
    if not outstanding:
        return None
    batch = execute_tools(run, outstanding, toolbox.by_name, resuming=True)
    run.flush_hooks()
    return _after_batch(run, batch)


def _call_model(run: RunContext, toolbox: _Toolbox, pending: StepCommit | None) -> LLMStepOutput:
    """The ``{agent}.llm`` step: commit ``pending`` (with the answers it applies), then call the model."""
    llm_messages = build_agent_messages_for_llm(
        run.agent, run.messages, run.custom_state, skills_fragment=toolbox.skills_fragment
    )
    for capability in run.capabilities_at("model_messages"):
        llm_messages = capability.model_messages(run, llm_messages)
    applied, run.applied_pending = run.applied_pending, []
    llm_hooks = run.hooks if run.wants("before_llm_call", "after_llm_call") else None
    out: LLMStepOutput = DBOS.run_step(
        {"name": step_names.llm(run.agent.name)},
        llm_step,
        run.who,
        run.step,
        llm_messages,
        toolbox.tools,
        pending,
        applied,
        llm_hooks,
    )
    observe_current().llm_step_returned(run.step)  # tells a replayed step from one that ran here
    return out


def _plan(run: RunContext, step_result: StepResult) -> StepProcessingPlan:
    """What to do with the step: in the native / prompted output modes a final answer is the output."""
    agent = run.agent
    if agent.output_mode != "tool":
        direct = plan_direct_output(step_result, agent.output_schema, run.rt.logger)
        if direct is not None:
            return direct
    return plan_step_processing(step_result, output_schema=agent.output_schema, logger=run.rt.logger)


def _process_step(
    run: RunContext, toolbox: _Toolbox, step_result: StepResult, plan: StepProcessingPlan
) -> RunSummary | None:
    """Apply the model's step: its message, its finish call, its tools. Ends the run when it must."""
    if plan.assistant_message_plan is not None:
        run.append(create_assistant_message(plan.assistant_message_plan))
        if isinstance(step_result, TextStepResult):
            run.last_text = step_result.content
    delegated = _answer_finish_call(run, plan)
    if delegated:  # sub-agent calls made alongside __finish__ run before it completes (the seeds' order)
        invalid = tool_call_argument_errors(step_result)
        run.children_may_park = False  # the run completes when they end: a continuation would not
        execute_tools(run, delegated, toolbox.by_name, invalid_arguments=invalid)
        run.children_may_park = True
    if plan.is_terminal:
        return _finish_terminal(run, plan)
    batch = BatchOutcome()
    calls = plan.pending_tool_calls + sub_agent_tool_calls(plan.pending_sub_agent_calls)
    if calls:
        invalid = tool_call_argument_errors(step_result)
        batch = execute_tools(run, calls, toolbox.by_name, invalid_arguments=invalid)
    run.flush_hooks()
    return _after_batch(run, batch)


def _finish_terminal(run: RunContext, plan: StepProcessingPlan) -> RunSummary:
    """The plan ended the agent (``__finish__`` accepted, or a terminal failure)."""
    status = plan.status_update.status if plan.status_update else "completed"
    if status == "failed":
        error = plan.status_update.error if plan.status_update else "failed"
        run.emit(ErrorChunk(**run.chunk_base(), error=error or "failed", recoverable=False))
        return _finish(run, "failed", error=error)
    return _finish(run, "completed", output=plan.output)


def _append_correction(run: RunContext, toolbox: _Toolbox, step_result: StepResult, plan: StepProcessingPlan) -> bool:
    """Nudge the model toward a valid output; True if a correction was appended.

    An agent that must finish with a tool was cut off by max tokens or forgot to; or a native /
    prompted answer was not valid output.
    """
    if plan.output_validation_error is not None and plan.finish_tool_call_id is None:
        if run.step >= run.agent.max_steps:
            return False
        run.append(create_output_correction_message(plan.output_validation_error))
        return True
    finish_name = toolbox.finish_name
    if not finish_name or run.step >= run.agent.max_steps:
        return False
    if needs_max_tokens_recovery(step_result, has_output_schema=True):
        run.append(create_max_tokens_correction_message(finish_name))
        return True
    if needs_finish_reminder(step_result, has_output_schema=True):
        run.append(create_finish_reminder_message(finish_name))
        return True
    return False


def _after_batch(run: RunContext, batch: BatchOutcome) -> RunSummary | None:
    """End the run when a batch completed the agent, suspended, or was stopped; else ``None``."""
    if batch.stop == "suspended":
        return _finish(run, "suspended_client_tool", pending_ids=batch.pending_ids)
    if batch.stop == "awaiting_children":
        return _finish(run, "suspended_awaiting_children")
    if batch.stop == "interrupted":
        return _finish(run, "interrupted", reason="interrupted while waiting for tool results")
    if batch.stop == "aborted":
        return _finish(run, "failed", error=run.abort_error())
    if batch.winner is not None:
        if batch.winner.get("transform_error"):
            return _finish(run, "failed", error=batch.winner["transform_error"])
        return _finish(run, "completed", output=batch.winner.get("finish_output"))
    return None


def _stop(run: RunContext, step_result: StepResult, finish_name: str | None) -> RunSummary:
    """The run stopped without a completion tool: decide its final status and output."""
    if isinstance(step_result, ErrorStepResult):
        error = extract_error_message(step_result.error)
        run.emit(ErrorChunk(**run.chunk_base(), error=error, recoverable=False))
        return _finish(run, "failed", error=error)
    if determine_final_status(step_result) == "failed":
        error = f"The model stopped with reason {step_result.stop_reason!r}"
        return _finish(run, "failed", error=error)
    if finish_name is not None:
        error = f"Agent {run.agent.name!r} stopped after {run.step} steps without calling {finish_name}"
        return _finish(run, "failed", error=error)
    if run.agent.output_schema is not None:  # native / prompted output mode, no valid answer
        error = f"Agent {run.agent.name!r} stopped after {run.step} steps without a valid output"
        return _finish(run, "failed", error=error)
    return _finish(run, "completed", output=run.last_text)


def _answer_finish_call(run: RunContext, plan: StepProcessingPlan) -> list[ParsedToolCall]:
    """Keep the history invariant: pair ``__finish__`` and every call made alongside it.

    Sub-agent calls made alongside it are not skipped: they are returned, to be run before the
    agent completes (the seeds: completion is deferred until sub-agents finish).
    """
    if plan.finish_tool_call_id is None:
        return []
    if plan.output_validation_error is not None:
        run.append(
            create_tool_result_message(
                tool_call_id=plan.finish_tool_call_id,
                tool_name="__finish__",
                success=False,
                error=plan.output_validation_error,
            )
        )
    else:
        run.append(synthesize_finish_tool_result(plan.finish_tool_call_id))
    delegated = [call for call in plan.skipped_tool_calls if is_sub_agent_tool_name(call.name)]
    for call in plan.skipped_tool_calls:
        if call in delegated:
            continue
        run.append(
            create_tool_result_message(
                tool_call_id=call.id, tool_name=call.name, success=False, error=SKIPPED_BY_FINISH_MESSAGE
            )
        )
    return delegated


def _record_llm_usage(run: RunContext, step_result: StepResult, duration_ms: float | None) -> None:
    """One record per model attempt of the step: the one that answered, and apart (``success=False``) the rest.

    A failed attempt is recorded whether or not it was billed (a 500 or a 429 costs nothing but is
    one more request to that model), under the model it asked. Built from the step's recorded
    output, so a replay records the same rows, which the commit's key turns into no-ops.
    """
    if step_result.model_attempts:
        for attempt in step_result.model_attempts:
            answered = attempt.outcome == "answered"
            usage = (step_result.usage if answered else attempt.usage) or TokenUsage(model=attempt.model)
            usage = usage if usage.model else usage.model_copy(update={"model": attempt.model})
            value = duration_ms if answered else attempt.duration_ms
            run.pending_usage.append(_llm_record(run, usage, success=answered, duration_ms=value))
        return
    # Recorded before steps listed their attempts (or by an adapter that does not): the call, and
    # the attempts billed before it; an error is its billed attempts or one empty failed record.
    failed = list(step_result.failed_attempts_usage)
    if isinstance(step_result, ErrorStepResult):
        failed = failed or [step_result.usage or TokenUsage()]
        for i, usage in enumerate(failed):
            last = i == len(failed) - 1
            run.pending_usage.append(_llm_record(run, usage, success=False, duration_ms=duration_ms if last else None))
        return
    for usage in failed:
        run.pending_usage.append(_llm_record(run, usage, success=False, duration_ms=None))
    usage = step_result.usage or TokenUsage()
    run.pending_usage.append(_llm_record(run, usage, success=True, duration_ms=duration_ms))


def _llm_record(run: RunContext, usage: TokenUsage, *, success: bool, duration_ms: float | None) -> UsageRecord:
    return UsageRecord(
        kind="llm",
        name=usage.model or run.agent.llm_config.model,
        step=run.step,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cached_input_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        value=duration_ms,
        success=success,
        cost_usd=usage.cost_usd,
    )


def _finish(
    run: RunContext,
    status: FinalStatus,
    *,
    output: Any = None,
    error: str | None = None,
    reason: str | None = None,
    pending_ids: list[str] | None = None,
) -> RunSummary:
    """Commit the last iteration with the final status, emit the closing chunks, fire the hooks.

    A suspended run leaves the session ``active`` (the seeds' contract: open pending calls are the
    signal) and its stream open, since the continuation writes to the same stream.
    """
    end = RunEnd(status, output=output, error=error, reason=reason, pending_ids=list(pending_ids or []))
    for capability in run.capabilities_at("before_finish"):
        end = capability.before_finish(run, end) or end
    status, output, error, reason = end.status, end.output, end.error, end.reason
    pending_ids = end.pending_ids or None
    for capability in run.capabilities_at("on_finish"):
        capability.on_finish(run, end)
    run.flush_hooks()
    if status == "suspended_client_tool" or status == "suspended_awaiting_children":
        commit = run.pending_commit(run_status="suspended", checkpoint_status=status)
    else:
        session_status: SessionStatus = status
        commit = run.pending_commit(
            session_status=session_status, run_status=status, output=output, error=error, checkpoint_status=status
        )
    payload = RunPayload(
        run.who.session_id,
        run.who.run_id,
        run.agent.name,
        status,
        output=output,
        error=error,
        extra={"pending_tool_call_ids": pending_ids or []}
        if status != "suspended_awaiting_children"
        else {"pending_tool_call_ids": [], "children": list(run.awaiting_children), "reason": "awaiting_children"},
    )
    applied, run.applied_pending = run.applied_pending, []
    close_after = run.emitted if status in ("completed", "failed") else None
    out: FinalizeStepOutput = DBOS.run_step(
        {"name": step_names.finalize(run.agent.name)},
        finalize_step,
        run.who,
        commit,
        run.hooks,
        payload,
        applied,
        close_after,
    )
    closed = out.get("closing_chunks")
    if closed is not None:  # the step ended the stream before publishing the outcome
        run.emitted += closed
        return _summary(run, status, output, error, pending_ids)
    # A run recorded before the finalize step closed streams (replayed now), or one left open.
    run.emit_checkpoint(out.get("commit"), run.step)
    if status == "completed":
        run.emit(OutputChunk(**run.chunk_base(), output=output))
        run.rt.streams.end(run.who.stream_id, output)
    elif status == "interrupted":
        run.emit(RunInterruptedChunk(**run.chunk_base(), reason=reason))
    elif status == "failed":
        run.rt.streams.fail(run.who.stream_id, error or "failed")
    return _summary(run, status, output, error, pending_ids)


def _summary(
    run: RunContext, status: FinalStatus, output: Any, error: str | None, pending_ids: list[str] | None
) -> RunSummary:
    return RunSummary(
        session_id=run.who.session_id,
        run_id=run.who.run_id,
        status=status,
        output=output,
        error=error,
        step_count=run.step,
        pending_tool_call_ids=pending_ids or [],
        children=list(run.awaiting_children) if status == "suspended_awaiting_children" else [],
    )


__all__ = ["RunRequest", "RunSummary", "run_agent_loop"]
