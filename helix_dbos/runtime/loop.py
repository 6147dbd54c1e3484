"""The agent loop as DBOS workflow code: build messages -> LLM step -> plan -> tools -> stop check.

Everything here runs inside the ``helix_dbos.agent_run`` workflow and must be deterministic on
replay: decisions come from the pure orchestration functions and from checkpointed step outputs,
never from a clock or a fresh read of mutable data. (The transcript prefix read at the start is
immutable while the run is active, so reading it again on replay returns the same messages.)

Tool order follows the seeds: regular tools run in parallel, each as its own step, all seeded from
the same state and merged by the seeds' contract (appends compose, replaces are last-write-wins);
then finish_with tools run one after another, each seeing the merged state. The first successful
finish_with tool completes the agent; later finish_with calls in the same batch are not executed.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from dbos import DBOS, StepOptions
from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.agent import AgentConfig, AgentHooks
from helix_dbos.errors import extract_error_message, public_error_message
from helix_dbos.messages import AssistantMessage, Message, ToolResultMessage
from helix_dbos.orchestration.message_builder import (
    NOT_APPROVED_MESSAGE,
    SKIPPED_BY_FINISH_MESSAGE,
    create_assistant_message,
    create_finish_reminder_message,
    create_max_tokens_correction_message,
    create_tool_result_message,
    synthesize_finish_tool_result,
)
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
from helix_dbos.runtime._dbos_compat import is_dbos_control_exception
from helix_dbos.runtime.exiting import raise_if_exiting
from helix_dbos.runtime.hitl import HitlCall, await_answers, check_step, needs_approval, register_step
from helix_dbos.runtime.hooks import MessagePayload, RunPayload, ToolHookPayload, defined_hooks
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.steps import (
    RunIdentity,
    ToolStepRequest,
    fail_run_step,
    finalize_step,
    hooks_step,
    llm_step,
    tool_step,
)
from helix_dbos.session import RunStatus, SessionStatus
from helix_dbos.state.tracker import StepWritesAdapter, merge_step_writes
from helix_dbos.step_result import (
    ErrorStepResult,
    ParsedToolCall,
    StepResult,
    StepResultAdapter,
    TextStepResult,
    TokenUsage,
)
from helix_dbos.store.base import StepCommit, UsageRecord
from helix_dbos.stream.chunks import (
    CheckpointCreatedChunk,
    CustomEventChunk,
    ErrorChunk,
    OutputChunk,
    RunInterruptedChunk,
    RunPausedChunk,
    RunResumedChunk,
    StatePatchChunk,
    StreamChunk,
    ToolApprovalRequestChunk,
    ToolEndChunk,
    ToolStartChunk,
)
from helix_dbos.tool import FINISH_TOOL_NAME, Tool

_log = logging.getLogger("helix_dbos.runtime.loop")

FinalStatus = Literal["completed", "failed", "interrupted", "suspended_client_tool"]

SUB_AGENTS_UNSUPPORTED = "Sub-agent calls are not supported by helix-dbos yet; continue without delegating."


class RunRequest(BaseModel):
    """The workflow's input: ids plus what the run starts from (decided by ``start_run``)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    workflow_id: str
    agent_name: str
    turn: int
    mode: Literal["execute", "resume", "retry"] = "execute"
    stream_id: str
    start_message_count: int
    start_custom_state: dict[str, Any] = Field(default_factory=dict)
    previous_run_id: str | None = None
    fingerprint: str | None = None
    stream_start_sequence: int = 0
    resume_messages: list[Message] = Field(default_factory=list)
    """Input of a ``resume``; appended after any outstanding tool batch is resolved, so a user
    message never lands between a tool call and its result."""
    hook_names: list[str] | None = None
    """The hooks defined (agent's and per-call) when the run started. They decide which hook steps
    the run takes, so a replay in a process without the per-call hooks takes the same steps and
    DBOS finds its recorded ones. ``None`` (runs recorded before this field) uses the live hooks."""


class RunSummary(BaseModel):
    """What the workflow returns (JSON): the run's status, output or error, and ids."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    status: FinalStatus
    output: Any = None
    error: str | None = None
    step_count: int = 0
    pending_tool_call_ids: list[str] = Field(default_factory=list)
    """Set when the run suspended waiting for client results or approvals."""


@dataclass
class BatchOutcome:
    """How a batch of tool calls ended."""

    winner: dict[str, Any] | None = None
    """The output of the finish_with call that completed the agent, if one did."""
    stop: Literal["suspended", "aborted", "interrupted"] | None = None
    pending_ids: list[str] = field(default_factory=list)


class _Run:
    """Mutable in-memory state of one run; rebuilt identically when DBOS replays the workflow."""

    def __init__(self, rt: RuntimeServices, agent: AgentConfig, request: RunRequest, messages: list[Message]) -> None:
        self.rt = rt
        self.agent = agent
        self.request = request
        self.who = RunIdentity(
            session_id=request.session_id,
            run_id=request.run_id,
            workflow_id=request.workflow_id,
            stream_id=request.stream_id,
            agent=agent,
            stream_start_sequence=request.stream_start_sequence,
        )
        self.hooks: list[AgentHooks] = rt.hooks_for(request.workflow_id, agent.hooks)
        self.hook_plan = frozenset(defined_hooks(self.hooks) if request.hook_names is None else request.hook_names)
        self.messages = messages
        self.custom_state = dict(request.start_custom_state)
        self.committed_count = request.start_message_count
        self.pending_messages: list[Message] = []
        self.pending_usage: list[UsageRecord] = []
        self.step = 0
        self.last_text: str | None = None
        self.deferred_hooks: list[tuple[str, object]] = []
        self.applied_pending: list[str] = []
        self.emitted = 0
        """HITL answers turned into results since the last commit; marked applied with it."""

    def wants(self, *hooks: str) -> bool:
        """Whether the run's hook plan has any of ``hooks`` (decides hook steps; see ``hook_names``)."""
        return any(h in self.hook_plan for h in hooks)

    # -- transcript --------------------------------------------------------------------------------
    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.pending_messages.append(message)
        if self.wants("on_message"):
            payload = MessagePayload(self.who.session_id, self.who.run_id, self.agent.name, message)
            self.deferred_hooks.append(("on_message", payload))

    def emit(self, chunk: StreamChunk) -> None:
        """Write a chunk from workflow code, keyed by its position in the run.

        Workflow code re-runs on recovery and emits the same chunks in the same order, so
        ``{run_id}:{ordinal}`` lets a durable stream keep exactly one copy of each.
        """
        self.emitted += 1
        self.rt.streams.write(self.who.stream_id, chunk, dedupe_key=f"{self.who.run_id}:{self.emitted}")

    def chunk_base(self) -> dict[str, Any]:
        return {"agent_id": self.who.run_id, "agent_type": self.agent.name, "step": self.step}

    def pending_commit(
        self,
        *,
        session_status: SessionStatus | None = None,
        run_status: RunStatus | None = None,
        output: Any = None,
        error: str | None = None,
        checkpoint_status: str = "running",
    ) -> StepCommit:
        """Everything not yet committed; ``now_ms`` is filled in by the step that commits it."""
        commit = StepCommit(
            session_id=self.who.session_id,
            run_id=self.who.run_id,
            step_count=self.step,
            first_sequence=self.committed_count,
            messages=list(self.pending_messages),
            custom_state=dict(self.custom_state),
            usage=list(self.pending_usage),
            session_status=session_status,
            run_status=run_status,
            output=output,
            error=error,
            checkpoint_status=checkpoint_status,
            now_ms=0,
        )
        self.committed_count += len(self.pending_messages)
        self.pending_messages = []
        self.pending_usage = []
        return commit

    def flush_hooks(self) -> None:
        if not self.deferred_hooks:
            return
        events, self.deferred_hooks = self.deferred_hooks, []
        DBOS.run_step({"name": step_names.hooks(self.agent.name)}, hooks_step, self.who, self.hooks, events)


def run_agent_loop(request: RunRequest) -> RunSummary:
    """Run (or, under replay, re-run deterministically) one agent run to its end.

    An unexpected exception (a bug, an unregistered agent) must not leave the session ``active``
    forever: it is recorded as a failed run, in a step, and reported as the run's error.
    """
    try:
        return _run_loop(request)
    except Exception as exc:
        if is_dbos_control_exception(exc):
            raise  # cancellation, lost ownership and the like belong to DBOS
        raise_if_exiting(exc)
        _log.error("run %s failed", request.run_id, exc_info=exc)
        error = public_error_message(exc)  # what clients see; the driver's details stay in the log
        DBOS.run_step({"name": step_names.FAIL_RUN}, fail_run_step, request.session_id, request.run_id, error)
        rt = services.current()
        rt.streams.fail(request.stream_id, error)
        return RunSummary(session_id=request.session_id, run_id=request.run_id, status="failed", error=error)


def _run_loop(request: RunRequest) -> RunSummary:
    rt = services.current()
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
    run = _Run(rt, agent, request, messages)
    tools = build_effective_tools(agent)
    tools_by_name = {t.name: t for t in tools}
    finish_name = completion_tool_name(agent)
    stop_config = StopConfig(max_steps=agent.max_steps, stop_when=agent.stop_when)

    if run.wants("on_agent_start"):  # its own step only when defined: recovery must not fire it again
        start = RunPayload(
            run.who.session_id,
            run.who.run_id,
            agent.name,
            "running",
            previous_run_id=request.previous_run_id,
            extra={"mode": request.mode, "turn": request.turn},
        )
        DBOS.run_step(
            {"name": step_names.hooks(agent.name)}, hooks_step, run.who, run.hooks, [("on_agent_start", start)]
        )
    outstanding = _outstanding_calls(run.messages)
    if outstanding:  # a continuation: answer the batch the previous run suspended on, first
        batch = _execute_tools(run, outstanding, tools_by_name, resuming=True)
        run.flush_hooks()
        early = _after_batch(run, batch)
        if early is not None:
            return early
    for message in request.resume_messages:
        run.append(message)
    # Step 0's commit is the run's genesis checkpoint, and reading the interrupt flag with it means
    # an interrupt that arrives before the first model call is honoured too.
    pending: StepCommit | None = run.pending_commit()

    while True:
        run.step += 1
        llm_messages = build_agent_messages_for_llm(agent, run.messages, run.custom_state)
        applied, run.applied_pending = run.applied_pending, []
        llm_hooks = run.hooks if run.wants("before_llm_call", "after_llm_call") else None
        out = DBOS.run_step(
            {"name": step_names.llm(agent.name)},
            llm_step,
            run.who,
            run.step,
            llm_messages,
            tools,
            pending,
            applied,
            llm_hooks,
        )
        pending = None
        _emit_checkpoint(run, out.get("commit"), run.step - 1)
        if out.get("interrupted"):
            run.step -= 1
            return _finish(run, "interrupted", error=None, reason=out.get("interrupt_reason"))
        step_result = StepResultAdapter.validate_python(out["step_result"])
        _record_llm_usage(run, step_result)
        plan = plan_step_processing(step_result, output_schema=agent.output_schema, logger=rt.logger)
        if plan.assistant_message_plan is not None:
            assistant = create_assistant_message(plan.assistant_message_plan)
            run.append(assistant)
            if isinstance(step_result, TextStepResult):
                run.last_text = step_result.content
        _answer_finish_call(run, plan)
        if plan.is_terminal:
            status = plan.status_update.status if plan.status_update else "completed"
            if status == "failed":
                error = plan.status_update.error if plan.status_update else "failed"
                run.emit(ErrorChunk(**run.chunk_base(), error=error or "failed", recoverable=False))
                return _finish(run, "failed", error=error)
            return _finish(run, "completed", output=plan.output)

        batch = BatchOutcome()
        if plan.pending_tool_calls or plan.pending_sub_agent_calls:
            invalid = tool_call_argument_errors(step_result)
            batch = _execute_tools(run, plan.pending_tool_calls, tools_by_name, invalid_arguments=invalid)
            for call in plan.pending_sub_agent_calls:
                run.append(
                    create_tool_result_message(
                        tool_call_id=call.id,
                        tool_name=f"subagent__{call.agent_type}",
                        success=False,
                        error=SUB_AGENTS_UNSUPPORTED,
                    )
                )
        run.flush_hooks()
        early = _after_batch(run, batch)
        if early is not None:
            return early

        if finish_name and run.step < agent.max_steps:
            if needs_max_tokens_recovery(step_result, has_output_schema=True):
                run.append(create_max_tokens_correction_message(finish_name))
                pending = run.pending_commit()
                continue
            if needs_finish_reminder(step_result, has_output_schema=True):
                run.append(create_finish_reminder_message(finish_name))
                pending = run.pending_commit()
                continue
        if should_stop_execution(step_result, run.step, stop_config):
            return _stop(run, step_result, finish_name)
        pending = run.pending_commit()


def _after_batch(run: _Run, batch: BatchOutcome) -> RunSummary | None:
    """End the run when a batch completed the agent, suspended, or was stopped; else ``None``."""
    if batch.stop == "suspended":
        return _finish(run, "suspended_client_tool", pending_ids=batch.pending_ids)
    if batch.stop == "interrupted":
        return _finish(run, "interrupted", reason="interrupted while waiting for tool results")
    if batch.stop == "aborted":
        return _finish(run, "failed", error="aborted")
    if batch.winner is not None:
        if batch.winner.get("transform_error"):
            return _finish(run, "failed", error=batch.winner["transform_error"])
        return _finish(run, "completed", output=batch.winner.get("finish_output"))
    return None


def _outstanding_calls(messages: list[Message]) -> list[ParsedToolCall]:
    """Calls of the last assistant message that have no result yet (a suspended batch)."""
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    if last is None or not last.tool_calls:
        return []
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    return [
        ParsedToolCall(id=c.id, name=c.name, arguments=c.arguments)
        for c in last.tool_calls
        if c.id not in answered and c.name != FINISH_TOOL_NAME
    ]


def _stop(run: _Run, step_result: StepResult, finish_name: str | None) -> RunSummary:
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
    return _finish(run, "completed", output=run.last_text)


def _answer_finish_call(run: _Run, plan: StepProcessingPlan) -> None:
    """Keep the history invariant: pair ``__finish__`` and every call made alongside it."""
    if plan.finish_tool_call_id is None:
        return
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
    for call in plan.skipped_tool_calls:
        run.append(
            create_tool_result_message(
                tool_call_id=call.id, tool_name=call.name, success=False, error=SKIPPED_BY_FINISH_MESSAGE
            )
        )


def _record_llm_usage(run: _Run, step_result: StepResult) -> None:
    usage = step_result.usage or TokenUsage()
    run.pending_usage.append(
        UsageRecord(
            kind="llm",
            name=run.agent.llm_config.model,
            step=run.step,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            success=not isinstance(step_result, ErrorStepResult),
        )
    )


def _emit_checkpoint(run: _Run, commit: dict[str, Any] | None, step: int) -> None:
    if commit is None:
        return
    run.emit(
        CheckpointCreatedChunk(
            agent_id=run.who.run_id,
            agent_type=run.agent.name,
            step=step,
            checkpoint_id=commit["checkpoint_id"],
            step_count=step,
        )
    )


# --- tools ------------------------------------------------------------------------------------------


def _execute_tools(
    run: _Run,
    calls: list[ParsedToolCall],
    tools_by_name: dict[str, Tool],
    *,
    resuming: bool = False,
    invalid_arguments: dict[str, str] | None = None,
) -> BatchOutcome:
    """Run a batch of tool calls in the seeds' phase order.

    Phase 1: regular server tools, in parallel, each its own step, merged by the seeds' contract.
    Human-in-the-loop calls are registered and awaited meanwhile (approved calls then run as steps).
    Phase 2: finish_with tools one after another on the merged state; the first success wins.
    ``resuming`` answers the batch a suspended run left behind (its calls already streamed).
    ``invalid_arguments`` (call id -> message) are calls whose arguments were not an object: they
    are answered with that error, never run on the ``{}`` they were coerced to.
    """
    results: dict[str, dict[str, Any]] = {}
    regular: list[tuple[ParsedToolCall, Tool]] = []
    hitl: list[HitlCall] = []
    finishing: list[tuple[ParsedToolCall, Tool]] = []
    known: dict[str, dict[str, Any]] = {}
    if resuming:
        known = DBOS.run_step(
            {"name": step_names.hitl_check(run.agent.name)}, check_step, run.who, [c.id for c in calls]
        )["rows"]
    for call in calls:
        tool = tools_by_name.get(call.name)
        if tool is None:
            results[call.id] = _unknown_tool_result(call, tools_by_name)
            if call.id in known:  # never left open: the call has its result now
                run.applied_pending.append(call.id)
        elif invalid_arguments and call.id in invalid_arguments:
            results[call.id] = _error_result(call, invalid_arguments[call.id])
        elif call.id in known:
            hitl.append(HitlCall(call, tool, known[call.id]["kind"]))
        elif tool.is_client:
            hitl.append(HitlCall(call, tool, "client"))
        elif tool.execute is None:
            results[call.id] = _unknown_tool_result(call, tools_by_name)
        elif tool.finish_with:
            finishing.append((call, tool))
        elif tool.require_approval is not False and needs_approval(run.agent.name, tool, call, run.who.session_id):
            hitl.append(HitlCall(call, tool, "approval"))
        else:
            regular.append((call, tool))

    if not resuming:
        # A human-in-the-loop call's tool_start goes out after the call is registered (below), so a
        # client that answers as soon as it sees tool_start always finds its pending call.
        waiting = {h.call.id for h in hitl}
        for call in calls:
            if call.id not in waiting:
                run.emit(_tool_start(run, call))
    registration: dict[str, Any] | None = None
    if hitl:
        registration = DBOS.run_step(
            {"name": step_names.hitl_register(run.agent.name)},
            register_step,
            run.who,
            hitl,
            run.rt.hot_window_seconds,
            run.hooks,
            not resuming,
        )
        if not resuming:
            _emit_hitl_requests(run, hitl, registration)

    base = dict(run.custom_state)
    phase1 = _run_tool_steps(run, regular, base)
    _merge_into_run(run, base, phase1)
    for output in phase1:
        results[output["tool_call_id"]] = output

    if hitl and registration is not None:
        wait, rows = await_answers(
            run.who,
            [h.call.id for h in hitl],
            registration,
            hooks=run.hooks,
            previous_run_id=run.request.previous_run_id if resuming else run.who.run_id,
        )
        if wait != "resolved":
            for call in calls:  # record what did run; the human calls stay open
                if call.id in results:
                    _record_tool_result(run, call, results[call.id])
            stop: Literal["suspended", "aborted", "interrupted"] = "suspended" if wait == "parked" else wait
            return BatchOutcome(stop=stop, pending_ids=[h.call.id for h in hitl if h.call.id not in results])
        previous = run.request.previous_run_id if resuming else run.who.run_id
        run.emit(RunResumedChunk(**run.chunk_base(), run_id=run.who.run_id, previous_run_id=previous))
        approved = _answers_to_results(run, hitl, rows, results)
        executed = _run_tool_steps(run, approved, dict(run.custom_state))
        _merge_into_run(run, dict(run.custom_state), executed)
        for output in executed:
            results[output["tool_call_id"]] = output
        run.applied_pending.extend(h.call.id for h in hitl)

    winner: dict[str, Any] | None = None
    for call, tool in finishing:
        if winner is not None:
            results[call.id] = _error_result(
                call, f"Not executed: the agent already completed via '{winner['tool_name']}'."
            )
            continue
        (output,) = _run_tool_steps(run, [(call, tool)], dict(run.custom_state))
        _merge_into_run(run, dict(run.custom_state), [output])
        results[call.id] = output
        if output["success"] or output.get("transform_error"):
            winner = output

    for call in calls:  # messages, chunks and deferred hooks in input order
        _record_tool_result(run, call, results[call.id])
    return BatchOutcome(winner=winner)


def _merge_into_run(run: _Run, base: dict[str, Any], outputs: list[dict[str, Any]]) -> None:
    if not outputs:
        return
    merged, warnings = merge_step_writes(base, [StepWritesAdapter.validate_python(o["writes"]) for o in outputs])
    for warning in warnings:
        run.rt.logger.warn(f"[helix-dbos] state merge: {warning}", {"run_id": run.who.run_id})
    run.custom_state = merged


def _tool_start(run: _Run, call: ParsedToolCall) -> ToolStartChunk:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    return ToolStartChunk(**run.chunk_base(), tool_call_id=call.id, tool_name=call.name, arguments=arguments)


def _emit_hitl_requests(run: _Run, hitl: list[HitlCall], registration: dict[str, Any]) -> None:
    for h in hitl:
        run.emit(_tool_start(run, h.call))
        if h.kind == "approval":
            run.emit(
                ToolApprovalRequestChunk(
                    **run.chunk_base(),
                    tool_call_id=h.call.id,
                    tool_name=h.tool.name,
                    arguments=h.call.arguments if isinstance(h.call.arguments, dict) else {},
                    arguments_digest=registration["digests"][h.call.id],
                    deadline=registration["deadlines"].get(h.call.id),
                )
            )
    run.emit(
        RunPausedChunk(
            **run.chunk_base(), reason="awaiting_tool_results", pending_tool_call_ids=[h.call.id for h in hitl]
        )
    )


def _answers_to_results(
    run: _Run, hitl: list[HitlCall], rows: dict[str, dict[str, Any]], results: dict[str, dict[str, Any]]
) -> list[tuple[ParsedToolCall, Tool]]:
    """Turn recorded answers into tool results; returns the approved calls, which must now run."""
    approved: list[tuple[ParsedToolCall, Tool]] = []
    for h in hitl:
        row = rows[h.call.id]
        submission = row.get("submission") or {}
        if row["status"] == "expired":
            waited = f" after {h.tool.timeout_ms} ms" if h.tool.timeout_ms else ""
            who = "the client" if h.kind == "client" else "approval"
            results[h.call.id] = _error_result(h.call, f"Tool call timed out waiting for {who}{waited}")
        elif h.kind == "client":
            if submission.get("error"):
                results[h.call.id] = _error_result(h.call, str(submission["error"]))
            else:
                results[h.call.id] = {
                    **_error_result(h.call, None),
                    "success": True,
                    "result": submission.get("result"),
                }
        elif submission.get("approved") and submission.get("arguments_digest") in (None, row["arguments_digest"]):
            approved.append((h.call, h.tool))
        else:
            results[h.call.id] = {**_error_result(h.call, NOT_APPROVED_MESSAGE), "after_tool": False}
    return approved


def _run_tool_steps(
    run: _Run, batch: list[tuple[ParsedToolCall, Tool]], base_state: dict[str, Any]
) -> list[dict[str, Any]]:
    """Each call is its own DBOS step; several run concurrently on reserved, ordered step ids."""
    requests = [ToolStepRequest(run.who, tool, call, base_state, run.hooks) for call, tool in batch]
    options: list[StepOptions] = [{"name": step_names.tool(run.agent.name, r.tool.name)} for r in requests]
    if len(requests) <= 1:
        return [DBOS.run_step(options[i], tool_step, r) for i, r in enumerate(requests)]
    reservations = [DBOS.reserve_step() for _ in requests]

    def run_reserved(i: int) -> dict[str, Any]:
        return reservations[i].run(options[i], tool_step, requests[i])

    futures = [run.rt.tool_pool.submit(contextvars.copy_context().run, run_reserved, i) for i in range(len(requests))]
    return [future.result() for future in futures]


def _unknown_tool_result(call: ParsedToolCall, tools_by_name: dict[str, Tool]) -> dict[str, Any]:
    available = ", ".join(sorted(n for n, t in tools_by_name.items() if t.execute is not None)) or "none"
    name = call.name if len(call.name) <= 200 else call.name[:200] + "..."
    return _error_result(call, f"Unknown tool '{name}'. Available tools: {available}.")


def _error_result(call: ParsedToolCall, error: str | None) -> dict[str, Any]:
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


def _record_tool_result(run: _Run, call: ParsedToolCall, output: dict[str, Any]) -> None:
    for event in output["events"]:
        run.emit(CustomEventChunk(**run.chunk_base(), event_name=event["event_name"], data=event["data"]))
    if output["patches"]:
        run.emit(StatePatchChunk(**run.chunk_base(), patches=output["patches"]))
    success = bool(output["success"])
    run.append(
        create_tool_result_message(
            tool_call_id=call.id,
            tool_name=call.name,
            result=output["result"],
            success=success,
            error=output["error"],
        )
    )
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
        run.deferred_hooks.append(
            (
                "after_tool",
                ToolHookPayload(
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
                ),
            )
        )


# --- the end of a run -------------------------------------------------------------------------------


def _finish(
    run: _Run,
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
    run.flush_hooks()
    if status == "suspended_client_tool":
        commit = run.pending_commit(run_status="suspended", checkpoint_status="suspended_client_tool")
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
        extra={"pending_tool_call_ids": pending_ids or []},
    )
    applied, run.applied_pending = run.applied_pending, []
    out = DBOS.run_step(
        {"name": step_names.finalize(run.agent.name)}, finalize_step, run.who, commit, run.hooks, payload, applied
    )
    _emit_checkpoint(run, out.get("commit"), run.step)
    if status == "completed":
        run.emit(OutputChunk(**run.chunk_base(), output=output))
        run.rt.streams.end(run.who.stream_id, output)
    elif status == "interrupted":
        run.emit(RunInterruptedChunk(**run.chunk_base(), reason=reason))
    elif status == "failed":
        run.rt.streams.fail(run.who.stream_id, error or "failed")
    return RunSummary(
        session_id=run.who.session_id,
        run_id=run.who.run_id,
        status=status,
        output=output,
        error=error,
        step_count=run.step,
        pending_tool_call_ids=pending_ids or [],
    )


__all__ = ["RunRequest", "RunSummary", "run_agent_loop"]
