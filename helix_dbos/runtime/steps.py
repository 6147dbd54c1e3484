"""The bodies of the agent workflow's DBOS steps: the I/O boundary of a run.

Three kinds of step, each checkpointed by DBOS under a stable name (a persisted contract):

- ``{agent}.llm``   - commits the previous iteration to the store (idempotently), reads the
  interrupt flag in the same transaction, then calls the model;
- ``{agent}.tool.{name}`` - validates the arguments and runs one tool call;
- ``{agent}.finalize`` - commits the last iteration with the run's final status;
- ``{agent}.hooks`` - fires the deferred ``on_message`` / ``after_tool`` hooks (only when defined).

Folding the store commit into the next LLM step is deliberate: an agent iteration then costs one
extra database commit, not an extra DBOS step (two more commits). It is safe because the commit is
deterministic (built from checkpointed step outputs) and idempotent (keyed by run and step).

Step outputs are plain JSON-able dicts, never pickled classes, so moving or renaming code can never
make a recorded run unreadable; :mod:`helix_dbos.runtime.step_outputs` types them, and
:mod:`helix_dbos.runtime.step_names` holds their names.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from dataclasses import dataclass, replace
from typing import Any

from dbos import DBOS
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from helix_dbos.agent import AgentConfig, AgentHooks
from helix_dbos.errors import HelixError, ProcessExiting, extract_error_message
from helix_dbos.llm.base import LLMAdapter, LLMGenerateInput, LLMStreamCallbacks
from helix_dbos.llm.send_slot import counted_call
from helix_dbos.messages import Message
from helix_dbos.observability import run_observer as observe
from helix_dbos.orchestration.output_modes import native_response_format
from helix_dbos.orchestration.step_processor import validate_output
from helix_dbos.runtime import services
from helix_dbos.runtime.abort import durable_stop_reason
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.attempt_resync import DeadAttempt, ResyncPoint, announce_dead_attempt
from helix_dbos.runtime.exiting import process_exiting, raise_if_exiting
from helix_dbos.runtime.hooks import (
    LLMCallPayload,
    MessagePayload,
    RunPayload,
    StateChangePayload,
    ToolHookPayload,
    fire,
    has_hook,
)
from helix_dbos.runtime.run_request import OUTCOME_EVENT, RunIdentity
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.step_outputs import (
    CommitOutput,
    FailRunStepOutput,
    FinalizeStepOutput,
    HooksStepOutput,
    LLMStepOutput,
    StopReasonStepOutput,
    ToolStepOutput,
    empty_tool_output,
)
from helix_dbos.runtime.unknown_outcomes import log_outcome_unknown, outcome_unknown_output
from helix_dbos.state.tracker import StateTracker, StepWritesAdapter
from helix_dbos.step_result import ParsedToolCall, StepResult, StepResultAdapter, is_error_step
from helix_dbos.store.base import CommitResult, StepCommit
from helix_dbos.store.engine import now_ms
from helix_dbos.store.retry import RetryPolicy, retry_call
from helix_dbos.stream.chunks import (
    CheckpointCreatedChunk,
    OutputChunk,
    StreamChunk,
    TextDeltaChunk,
    ThinkingChunk,
)
from helix_dbos.tool import Tool, create_tool_context, validation_error_message

# --- LLM step -------------------------------------------------------------------------------------


def llm_step(
    who: RunIdentity,
    step: int,
    messages: list[Message],
    tools: list[Tool],
    pending: StepCommit | None,
    applied_pending: list[str] | None = None,
    hooks: list[AgentHooks] | None = None,
) -> LLMStepOutput:
    """Commit the previous iteration, honour a pending interrupt, then call the model once.

    ``hooks`` (given only when a run defines ``before_llm_call`` / ``after_llm_call``) fire right
    around the model call, inside this step, so a recovered run does not fire them again.
    """
    rt = services.current()
    observer = observe.current()
    commit: CommitOutput | None = None
    if pending is not None:
        applied = applied_pending or []
        result = commit_with_chunks(
            rt, who, pending.model_copy(update={"now_ms": now_ms(), "applied_tool_call_ids": applied})
        )
        observer.committed(pending.step_count, result.applied)
        commit = _commit_output(result)
        if not result.applied:
            # Our commit was already there: an earlier attempt of this very step got past it and
            # died, possibly mid-stream. Tell readers to drop what it streamed.
            _announce_resync(who, step, result.checkpoint_id, pending)
        if result.interrupt_requested:
            return {"commit": commit, "interrupted": True, "interrupt_reason": result.interrupt_reason}
    agent = who.agent
    mirrored = 0
    streamed = False  # the current attempt wrote a delta: its failure must void it

    async def write(chunk: StreamChunk) -> None:
        nonlocal mirrored, streamed
        streamed = True
        await rt.streams.write_async(who.stream_id, chunk)
        if who.parent_stream_id is not None:
            # Keyed by position in this step: an attempt that re-streams the step (after a crash
            # mid-call) does not add a second copy of what the parent's stream already shows.
            mirrored += 1
            await rt.streams.write_async(who.parent_stream_id, chunk, f"{who.run_id}:llm:{step}:{mirrored}")

    async def on_text(delta: str) -> None:
        await write(TextDeltaChunk(agent_id=who.run_id, agent_type=agent.name, step=step, content=delta))

    async def on_thinking(content: str, is_complete: bool) -> None:
        await write(
            ThinkingChunk(
                agent_id=who.run_id,
                agent_type=agent.name,
                step=step,
                content=content,
                is_complete=is_complete,
            )
        )

    async def on_error(error: BaseException) -> None:
        """An attempt failed and another follows: tell readers to drop what it streamed.

        The parent's copy gets its own resync, under the next mirror key: the retry's copies are
        keyed after it, so none is mistaken for a failed attempt's copy already stored.
        """
        nonlocal mirrored, streamed
        if not streamed:
            return
        streamed = False
        point = await asyncio.to_thread(_resync_point, rt, who, step, commit, pending)

        async def own(chunk: StreamChunk) -> None:
            await rt.streams.write_async(who.stream_id, chunk)

        manager = rt.streams.manager
        dead = DeadAttempt(who.run_id, agent.name, step, point)
        await announce_dead_attempt(manager, who.stream_id, own, dead, after_sequence=who.stream_start_sequence)
        parent_stream_id = who.parent_stream_id
        if parent_stream_id is not None:
            mirrored += 1
            key = f"{who.run_id}:llm:{step}:{mirrored}"

            async def mirror(chunk: StreamChunk) -> None:
                await rt.streams.write_async(parent_stream_id, chunk, key)

            await announce_dead_attempt(manager, parent_stream_id, mirror, dead, after_sequence=0)

    request = LLMGenerateInput(
        messages=messages,
        tools=tools,
        config=agent.llm_config,
        agent_id=who.run_id,
        agent_type=agent.name,
        session_id=who.session_id,
        callbacks=LLMStreamCallbacks(on_text_delta=on_text, on_thinking=on_thinking, on_error=on_error),
        response_format=native_response_format(agent.output_schema) if agent.output_mode == "native" else None,
    )
    call: LLMCallPayload | None = None  # built only when a hook will see it
    if hooks:
        call = LLMCallPayload(who.session_id, who.run_id, agent.name, step, messages, [t.name for t in tools])
        fire(hooks, "before_llm_call", call, rt.logger)
    started = time.perf_counter()
    with observer.llm_call(step, agent.llm_config.model) as traced:
        try:
            step_result = background_loop.run(_generate(rt.llm, request))
        except Exception as exc:
            raise_if_exiting(exc)
            raise
        traced.done(step_result)
    if is_error_step(step_result) and process_exiting():
        raise ProcessExiting(f"process exiting; not recording the model call's error: {step_result.error}")
    if hooks and call is not None:
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        fire(hooks, "after_llm_call", replace(call, step_result=step_result, duration_ms=elapsed), rt.logger)
    return {
        "commit": commit,
        "interrupted": False,
        "step_result": _dump_step_result(step_result),
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }


async def _generate(llm: LLMAdapter, request: LLMGenerateInput) -> StepResult:
    """The adapter's call; an exact rate limit's gate counts it whole when the adapter does not claim at the send."""
    async with counted_call(llm, request.config.model):
        return await llm.generate_step(request)


def commit_with_chunks(rt: RuntimeServices, who: RunIdentity, commit: StepCommit) -> CommitResult:
    """``store.commit_step``, storing the run's queued stream chunks in the same transaction.

    The chunks the workflow wrote since the previous commit (checkpoint, tool start and end, ...)
    would otherwise cost a stream transaction of their own every batching window. When the store
    and the durable stream share an engine they ride along; otherwise (in-memory stream, separate
    databases) the flusher stores them as before. A failed commit hands the chunks back to the
    flusher. An error that is not the commit's own (a chunk the database refuses) must not cost
    the step its commit: the step is committed again without the chunks, and the flusher isolates
    the bad one as it always does.
    """
    joint = rt.streams.backend.joint_commit
    held = None if joint is None else rt.streams.hold(who.stream_id, joint.engine)
    if joint is None or held is None:
        return rt.store.commit_step(commit)
    stored = False
    try:
        writes = held.for_commit()
        result = rt.store.commit_step(commit) if writes is None else joint.commit_step_with(commit, writes)
        stored = True
    except HelixError:
        raise
    except Exception:
        return rt.store.commit_step(commit)
    finally:
        held.release(stored=stored)
    return result


def _commit_output(result: CommitResult) -> CommitOutput:
    """A commit's result as the step records it (JSON)."""
    dumped: CommitOutput = result.model_dump(mode="json")  # type: ignore[assignment]
    return dumped


def _dump_step_result(step_result: StepResult) -> dict[str, Any]:
    """The step result as the step's recorded output (JSON types).

    pydantic-core cannot dump a dict *key* holding a lone surrogate in JSON mode (a key written as
    a surrogate escape in a model's JSON decodes to one); such a result is recorded in Python mode, which DBOS
    stores just as well and which validates back to the same result.
    """
    try:
        dumped: dict[str, Any] = StepResultAdapter.dump_python(step_result, mode="json")
    except UnicodeEncodeError:
        dumped = StepResultAdapter.dump_python(step_result)
    return dumped


def _announce_resync(who: RunIdentity, step: int, checkpoint_id: str, pending: StepCommit) -> None:
    """The step's own commit was already there: an earlier execution died in it, maybe mid-stream."""
    point = ResyncPoint(checkpoint_id, step - 1, pending.first_sequence + len(pending.messages))
    streams = services.current().streams

    async def write(chunk: StreamChunk) -> None:
        await streams.write_async(who.stream_id, chunk)

    background_loop.run(
        announce_dead_attempt(
            streams.manager,
            who.stream_id,
            write,
            DeadAttempt(who.run_id, who.agent.name, step, point),
            after_sequence=who.stream_start_sequence,
        )
    )


def _resync_point(
    rt: RuntimeServices, who: RunIdentity, step: int, commit: CommitOutput | None, pending: StepCommit | None
) -> ResyncPoint:
    """The state a failed attempt's step started from: this step's commit, else the session's latest checkpoint."""
    if commit is not None and pending is not None:
        return ResyncPoint(commit["checkpoint_id"], step - 1, pending.first_sequence + len(pending.messages))
    latest = rt.store.get_latest_checkpoint(who.session_id)
    if latest is None:
        return ResyncPoint("", step - 1, 0)
    return ResyncPoint(latest.id, latest.step_count, latest.message_count)


# --- tool step ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolStepRequest:
    """One tool call to run, with the state it starts from."""

    who: RunIdentity
    tool: Tool
    call: ParsedToolCall
    base_state: dict[str, Any]
    hooks: list[AgentHooks]
    call_key: str | None = None
    """``ToolContext.call_key``: set when an earlier call in the session used the call's id."""
    started_before: bool = False
    """A not-retry-safe call an earlier execution of the run may have run (its start marker was
    recorded then, its step never was): the step reports the outcome unknown instead of running it."""


def _run_execute(tool: Tool, tool_input: Any, ctx: Any) -> Any:
    execute = tool.execute
    assert callable(execute)
    if inspect.iscoroutinefunction(execute):
        return background_loop.run(tool.run(tool_input, ctx))
    result = execute(tool_input, ctx)
    if inspect.isawaitable(result):

        async def _await() -> Any:
            return await result

        result = background_loop.run(_await())
    if tool.output_schema is not None and not isinstance(result, tool.output_schema):
        result = tool.output_schema.model_validate(result)
    return result


def tool_step(request: ToolStepRequest) -> ToolStepOutput:
    """Validate and execute one tool call. Tool failures are results, not exceptions."""
    rt = services.current()
    who, tool, call = request.who, request.tool, request.call
    agent = who.agent
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    output = empty_tool_output(call.id, tool.name)
    if request.started_before:
        key = f"{who.session_id}:{request.call_key or call.id}"  # ToolContext.idempotency_key
        unknown = outcome_unknown_output(call, tool.name, key)
        log_outcome_unknown(who.session_id, who.run_id, agent.name, unknown)
        return unknown
    try:
        tool_input = tool.validate_input(arguments)
    except ValidationError as exc:
        output["error"] = validation_error_message(tool.name, exc)
        return output
    tracker = StateTracker(request.base_state, schema=agent.state_schema)
    ctx = create_tool_context(
        agent_id=who.run_id,
        agent_type=agent.name,
        session_id=who.session_id,
        tool_call_id=call.id,
        tool_name=tool.name,
        state_tracker=tracker,
        abort_signal=rt.tool_abort_signal(who.session_id),
        call_key=request.call_key,
    )
    if has_hook(request.hooks, "before_tool"):  # the payload only when a hook will see it
        fire(
            request.hooks,
            "before_tool",
            ToolHookPayload(
                who.session_id, who.run_id, agent.name, call.id, tool.name, arguments, state_tracker=tracker
            ),
            rt.logger,
        )
    started = time.perf_counter()
    with observe.current().tool_call(call.id, tool.name) as traced:
        try:
            result = _run_execute(tool, tool_input, ctx)
            output["success"] = True
            output["result"] = to_jsonable_python(result)
        except Exception as exc:
            raise_if_exiting(exc)
            output["error"] = f"Tool '{tool.name}' failed: {extract_error_message(exc)}"
            result = None
        traced.done(output["success"], output["error"])
    output["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
    writes = tracker.get_step_writes()
    output["writes"] = StepWritesAdapter.dump_python(writes, mode="json")
    output["patches"] = tracker.get_patches()
    output["events"] = [{"event_name": e.event_name, "data": to_jsonable_python(e.data)} for e in ctx.events]
    if not writes.is_empty and has_hook(request.hooks, "on_state_change"):
        fire(
            request.hooks,
            "on_state_change",
            StateChangePayload(who.session_id, who.run_id, agent.name, call.id, output["patches"], tracker.get_state()),
            rt.logger,
        )
    if output["success"] and tool.finish_with:
        _finish_with_output(tool, agent, result, output)
    return output


def _finish_with_output(tool: Tool, agent: AgentConfig, result: Any, output: ToolStepOutput) -> None:
    """Compute the agent output of a successful finish_with call (transform, then validate)."""
    value: Any = result
    if tool.finish_with_transform is not None:
        try:
            value = tool.finish_with_transform(result)
        except Exception as exc:  # the seeds: a throwing transform fails the run
            output["transform_error"] = f"finish_with_transform of '{tool.name}' failed: {extract_error_message(exc)}"
            return
    if agent.output_schema is not None:
        try:
            output["finish_output"] = validate_output(to_jsonable_python(value), agent.output_schema)
        except ValidationError as exc:
            output["success"] = False
            output["error"] = (
                f"The result of '{tool.name}' does not match the agent's output schema: {extract_error_message(exc)}"
            )
        return
    output["finish_output"] = to_jsonable_python(value)


# --- deferred hooks and finalize ------------------------------------------------------------------


def hooks_step(
    who: RunIdentity,
    hook_sets: list[AgentHooks],
    events: list[tuple[str, object]],
    base_state: dict[str, Any] | None = None,
) -> HooksStepOutput:
    """Fire deferred hooks in order; recorded so a recovered run does not fire them twice.

    With ``base_state`` (the run's custom state), tool and message hooks may change it: their
    changes are this step's recorded ``writes``, which the workflow merges (see ``runtime.hooks``).
    """
    rt = services.current()
    tracker = None if base_state is None else StateTracker(base_state, schema=who.agent.state_schema)
    for name, payload in events:
        if tracker is not None and isinstance(payload, ToolHookPayload | MessagePayload):
            payload = replace(payload, state_tracker=tracker)
        fire(hook_sets, name, payload, rt.logger)
    output: HooksStepOutput = {"fired": len(events)}
    if tracker is not None and tracker.has_changes():
        output["writes"] = StepWritesAdapter.dump_python(tracker.get_step_writes(), mode="json")
        output["patches"] = tracker.get_patches()
    return output


def finalize_step(
    who: RunIdentity,
    commit: StepCommit,
    hook_sets: list[AgentHooks],
    payload: RunPayload,
    applied_pending: list[str] | None = None,
    close_after: int | None = None,
) -> FinalizeStepOutput:
    """Commit the last iteration with the final status, then fire the completion hook exactly once.

    With ``close_after`` (the run's count of emitted chunks; given for a completed or failed run)
    the step also writes the run's closing chunks and ends the stream, *before* the outcome is
    published: a caller may start the session's next turn on the same stream as soon as it learns
    the outcome, and an end still to come would then end the stream the next turn had reopened.
    """
    rt = services.current()
    stamp = now_ms()
    applied = applied_pending or []
    result = commit_with_chunks(rt, who, commit.model_copy(update={"now_ms": stamp, "applied_tool_call_ids": applied}))
    if not result.applied and commit.session_status is not None and commit.run_status is not None:
        # This step was already committed by the LLM step (an interrupt stops before the model call),
        # so the final status needs its own write. finish_run is idempotent, like the commit.
        rt.store.finish_run(
            who.session_id,
            who.run_id,
            session_status=commit.session_status,
            run_status=commit.run_status,
            output=commit.output,
            error=commit.error,
            now_ms=stamp,
        )
    observe.current().finalized(
        payload.status,
        step_count=commit.step_count,
        applied=result.applied,
        error=payload.error,
        pending_ids=(payload.extra or {}).get("pending_tool_call_ids", []),
    )
    output: FinalizeStepOutput = {"commit": _commit_output(result)}
    if close_after is not None:
        output["closing_chunks"] = _close_stream(rt, who, commit.step_count, close_after, result, payload)
    publish_outcome(payload.status, payload.output, payload.error, who, payload.extra)
    _wake_parked_parent(rt, who, payload.status)
    # A parent parking on children that wait on humans announces it here: the seeds' on_agent_suspended
    # with reason awaiting_children (a client-tool suspension announces itself when it registers).
    hook = {
        "completed": "on_agent_complete",
        "failed": "on_agent_fail",
        "suspended_awaiting_children": "on_agent_suspended",
    }.get(payload.status)
    if hook is not None:
        fire(hook_sets, hook, payload, rt.logger)
    return output


def _wake_parked_parent(rt: RuntimeServices, who: RunIdentity, status: str) -> None:
    """A child's end may complete what its parked parent awaits; a parent parking may find it so already.

    The wake is fired after the outcome is published (the parent's continuation reads it) and is
    idempotent, so a re-executed finalize wakes again harmlessly (:mod:`.child_park`). A run with no
    parent that does not park asks nothing.
    """
    waker = rt.parent_waker
    if waker is None:
        return
    if status == "suspended_awaiting_children":
        waker.wake(who.session_id)
    elif who.parent_session_id is not None and not status.startswith("suspended"):
        waker.wake(who.parent_session_id)


def _close_stream(
    rt: RuntimeServices, who: RunIdentity, step: int, emitted: int, result: CommitResult, payload: RunPayload
) -> int:
    """Write the last checkpoint (and a completed run's output), then end the stream; returns the count.

    Keyed as the workflow keys its own chunks (``{run_id}:{ordinal}``, continuing from
    ``emitted``), so an attempt of this step that runs again stores none of them twice.
    """
    base = {"agent_id": who.run_id, "agent_type": who.agent.name, "step": step}
    chunks: list[StreamChunk] = [
        CheckpointCreatedChunk(**base, checkpoint_id=result.checkpoint_id, step_count=step),
    ]
    if payload.status == "completed":
        chunks.append(OutputChunk(**base, output=payload.output))
    for i, chunk in enumerate(chunks, start=emitted + 1):
        key = f"{who.run_id}:{i}"
        rt.streams.write(who.stream_id, chunk, dedupe_key=key)
        if who.parent_stream_id is not None:
            rt.streams.write(who.parent_stream_id, chunk, dedupe_key=key)
    if payload.status == "completed":
        rt.streams.end(who.stream_id, payload.output)
    else:
        rt.streams.fail(who.stream_id, payload.error or "failed")
    return len(chunks)


def stop_reason_step(session_id: str) -> StopReasonStepOutput:
    """``{agent}.stop_reason``: why the session's run must stop, read from the store and recorded.

    Workflow code takes a stopped run's error from here (``RunContext.abort_error``), so a replay
    ends the run with the error it ended with the first time, whatever the store says by then.
    """
    return {"reason": durable_stop_reason(services.current().store, session_id)}


def fail_run_step(session_id: str, run_id: str, error: str) -> FailRunStepOutput:
    """Mark a run failed after an unexpected error in workflow code (idempotent).

    Recording the failure waits for the database without a bound, as DBOS does for its own step
    records: the usual cause of getting here is the database having been away for longer than the
    store's retry bound, and a failure that cannot be recorded would leave the session ``active``
    with no run behind it, where ``retry()`` cannot pick it up.
    """
    rt = services.current()
    stamp = now_ms()
    retry_call(
        lambda: rt.store.finish_run(
            session_id, run_id, session_status="failed", run_status="failed", error=error, now_ms=stamp
        ),
        policy=_RECORD_FAILURE,
        operation="recording a failed run",
    )
    DBOS.set_event(OUTCOME_EVENT, {"status": "failed", "output": None, "error": error})
    observe.current().failed(error)
    return {"error": error}


_RECORD_FAILURE = RetryPolicy(max_seconds=math.inf, max_backoff=5.0)


def publish_outcome(
    status: str, output: Any, error: str | None, who: RunIdentity, extra: dict[str, Any] | None = None
) -> None:
    """Set the outcome event from inside a step: no extra checkpoint, and idempotent (last value wins)."""
    DBOS.set_event(
        OUTCOME_EVENT, {"status": status, "output": output, "error": error, "run_id": who.run_id, **(extra or {})}
    )


__all__ = [
    "OUTCOME_EVENT",
    "MessagePayload",
    "RunIdentity",
    "ToolHookPayload",
    "ToolStepRequest",
    "fail_run_step",
    "finalize_step",
    "hooks_step",
    "llm_step",
    "now_ms",
    "stop_reason_step",
    "tool_step",
]
