"""What one execution of an agent run reports: its spans and its lifecycle logs.

The runtime tells a :class:`RunObserver` what happens through a handful of calls, from two sides:

- workflow code (``runtime/loop.py``, ``runtime/tools.py``, ``runtime/hitl_capability.py``) opens
  the run (:func:`observe_run`), says when an LLM step returned
  (:meth:`RunObserver.llm_step_returned`), wraps a HITL wait and closes the run;
- step bodies (``runtime/steps.py``, ``runtime/hitl.py``) report what they execute: a commit, a
  model call, a tool call, the final status.

Why the split: DBOS replays a recovered workflow by running its code again and returning the
recorded outputs of completed steps without running their bodies. So whatever a step body reports
happened exactly once, and an LLM step that returned without its body having run here was
replayed: the run is a recovery. The observer logs ``run_recovered`` (not a second ``run_started``)
at the first body that runs after a replay, or when the LLM step finds its commit already made by
an earlier attempt, and opens spans only for what executes here, so a recovered run's trace holds
each step once (the dead process's run span was never ended, so never exported; the recovered one
carries ``helix.recovered``).

The observer lives in a context variable of the workflow's thread; tool steps run in pool threads
with a copy of that context, so they find it too. With no tracer provider and the lifecycle logger
off, :func:`observe_run` installs :data:`NOOP`, whose methods do nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from helix_dbos.observability import lifecycle
from helix_dbos.observability.tracing import (
    clean_attributes,
    provider_name,
    session_context,
    tracer,
    tracing_active,
)
from helix_dbos.step_result import ErrorStepResult, StepResult


@dataclass(frozen=True)
class RunInfo:
    """The ids and facts of a run that every span and log line carries."""

    session_id: str
    run_id: str
    agent: str
    model: str
    turn: int
    mode: str
    previous_run_id: str | None = None
    workflow_id: str | None = None


def executor_id() -> str | None:
    """The DBOS executor id of this process (who executes, for ``run_recovered``)."""
    try:
        from dbos import DBOS

        return str(DBOS.executor_id)
    except Exception:  # DBOS not configured: a unit test, a tool
        return None


class LLMCall:
    """The span of one model call; :meth:`done` records the result on it."""

    def __init__(self, span: Span | None) -> None:
        self.span = span

    def done(self, result: StepResult) -> None:
        """Record usage, finish reason and any error of ``result``."""
        if self.span is None:
            return
        usage = result.usage
        attributes: dict[str, Any] = {"gen_ai.response.finish_reasons": [result.stop_reason or "unknown"]}
        if usage is not None:
            attributes.update(
                {
                    "gen_ai.usage.input_tokens": usage.input_tokens,
                    "gen_ai.usage.output_tokens": usage.output_tokens,
                    "gen_ai.usage.cache_read.input_tokens": usage.cached_input_tokens,
                    # the GenAI conventions have no reasoning-token attribute (yet): ours, not theirs
                    "helix.usage.reasoning_tokens": usage.reasoning_tokens,
                }
            )
        if result.answered_by is not None:
            attributes["gen_ai.response.model"] = result.answered_by
        self.span.set_attributes(clean_attributes(attributes))
        for attempt in result.model_attempts:
            # one event per request to a model, at the time it started: retries and fallbacks on the trace
            self.span.add_event(
                "helix.llm.attempt",
                clean_attributes(
                    {
                        "gen_ai.request.model": attempt.model,
                        "helix.attempt.outcome": attempt.outcome,
                        "error.type": attempt.error_code,
                        "http.response.status_code": attempt.status_code,
                        "helix.attempt.wait_seconds": attempt.wait_seconds,
                        "helix.attempt.duration_ms": attempt.duration_ms,
                    }
                ),
                timestamp=int(attempt.started_at_ms * 1_000_000) or None,
            )
        if isinstance(result, ErrorStepResult):
            self.span.set_attribute("error.type", type(result.error).__name__)
            self.span.set_status(Status(StatusCode.ERROR, str(result.error)[:500]))


class ToolCall:
    """The span of one tool execution; :meth:`done` records its outcome."""

    def __init__(self, span: Span | None) -> None:
        self.span = span

    def done(self, success: bool, error: str | None) -> None:
        """Mark the span failed with ``error`` when the tool failed."""
        if self.span is not None and not success:
            self.span.set_attribute("error.type", "tool_error")
            self.span.set_status(Status(StatusCode.ERROR, (error or "failed")[:500]))


class HitlWait:
    """The span of a wait for client results or approvals; :meth:`done` records how it ended."""

    def __init__(self, span: Span | None) -> None:
        self.span = span
        self.outcome: str | None = None

    def done(self, outcome: str) -> None:
        """``resolved``, ``parked``, ``aborted`` or ``interrupted``."""
        self.outcome = outcome
        if self.span is not None:
            self.span.set_attribute("helix.hitl.outcome", outcome)


class RunObserver:
    """Spans and lifecycle logs of one execution of one run (see the module docstring)."""

    def __init__(self, info: RunInfo, *, traced: bool, logged: bool) -> None:
        self.info = info
        self.traced = traced
        self.logged = logged
        self.replayed_steps = 0
        self.recovered = False
        self._announced = False
        self._executed_step: int | None = None
        self._current_step = 0
        self._step_span: Span | None = None
        self._step_span_step: int | None = None
        self._step_started: dict[int, float] = {}
        self._started = time.monotonic()
        self._lock = threading.Lock()  # tool bodies report from pool threads
        self._ids = {"helix.session_id": info.session_id, "helix.run_id": info.run_id}
        self.run_span: Span | None = None
        if traced:
            self.run_span = tracer().start_span(
                f"invoke_agent {info.agent}",
                context=session_context(info.session_id),
                kind=SpanKind.INTERNAL,
                attributes=clean_attributes(
                    {
                        "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": info.agent,
                        "gen_ai.conversation.id": info.session_id,
                        "gen_ai.request.model": info.model,
                        "session.id": info.session_id,
                        **self._ids,
                        "helix.turn": info.turn,
                        "helix.mode": info.mode,
                        "helix.previous_run_id": info.previous_run_id,
                        "helix.workflow_id": info.workflow_id,
                    }
                ),
            )

    # --- workflow code --------------------------------------------------------------------------

    @property
    def replaying(self) -> bool:
        """Whether this execution is still re-running recorded steps (nothing executed here yet)."""
        return self.replayed_steps > 0 and not self._announced

    def llm_step_returned(self, step: int) -> None:
        """The loop got the output of LLM step ``step``; its body ran here or it was replayed."""
        with self._lock:
            self._current_step = step
            if self._executed_step != step:
                self.replayed_steps += 1

    @contextmanager
    def hitl_wait(self, call_ids: Sequence[str], *, continuation: bool = False) -> Iterator[HitlWait]:
        """Around a wait for human answers; a wait re-run under replay gets no span.

        ``continuation``: the wait of a run that continues a suspended one, for the answers that
        resumed it (its start was already logged as ``run_resumed``).
        """
        span = None
        if self.traced and not self.replaying:
            span = tracer().start_span(
                "helix.hitl.wait",
                context=trace.set_span_in_context(self._parent_for_step()),
                attributes=clean_attributes(
                    {
                        **self._ids,
                        "helix.step": self._current_step,
                        "helix.tool_call_ids": list(call_ids),
                        "helix.hitl.continuation": continuation,
                        "gen_ai.tool.call.id": call_ids[0] if len(call_ids) == 1 else None,
                    }
                ),
            )
        wait = HitlWait(span)
        try:
            yield wait
        finally:
            if span is not None:
                span.end()
        if wait.outcome == "resolved" and not continuation and not self.replaying:
            lifecycle.log_event(
                "run_resumed",
                self.info.session_id,
                self.info.run_id,
                how="answers arrived while waiting",
                tool_call_ids=list(call_ids),
            )

    @contextmanager
    def rate_limit_wait(self, limit_name: str, step: int) -> Iterator[None]:
        """Around a model call's wait for admission by a provider rate limit; none under replay."""
        span = None
        if self.traced and not self.replaying:
            with self._lock:  # the wait is part of its iteration: under the step span the model call joins
                parent = self._step_span_for(step)
            span = tracer().start_span(
                "helix.rate_limit.wait",
                context=trace.set_span_in_context(parent),
                attributes=clean_attributes({**self._ids, "helix.step": step, "helix.rate_limit.name": limit_name}),
            )
        try:
            yield
        finally:
            if span is not None:
                span.end()

    def close(self, status: str, *, error: str | None = None, pending_ids: Sequence[str] = ()) -> None:
        """The run's workflow code ended with ``status``: end the open spans."""
        with self._lock:
            self._end_step_span()
        span = self.run_span
        if span is None:
            return
        span.set_attribute("helix.status", status)
        span.set_attribute("helix.recovered", self.recovered)
        if status == "suspended_client_tool":
            span.add_event("helix.suspended", clean_attributes({"helix.pending_tool_call_ids": list(pending_ids)}))
        if status == "failed":
            span.set_status(Status(StatusCode.ERROR, (error or "failed")[:500]))
        span.end()

    # --- step bodies ----------------------------------------------------------------------------

    def executing(self, *, re_executed: bool = False) -> None:
        """A step body runs here. The first one says whether this run started or was recovered."""
        if self._announced:
            return
        with self._lock:
            if self._announced:
                return
            self._announced = True
            self.recovered = re_executed or self.replayed_steps > 0
        info = self.info
        if self.recovered:
            if self.run_span is not None:
                self.run_span.set_attribute("helix.recovered", True)
                self.run_span.add_event("helix.recovered", {"helix.replayed_steps": self.replayed_steps})
            lifecycle.log_event(
                "run_recovered",
                info.session_id,
                info.run_id,
                agent=info.agent,
                executor_id=executor_id(),
                replayed_steps=self.replayed_steps,
            )
            return
        event = "run_resumed" if info.mode == "resume" else "run_started"
        if self.run_span is not None and info.mode == "resume":
            self.run_span.add_event("helix.resumed", clean_attributes({"helix.previous_run_id": info.previous_run_id}))
        lifecycle.log_event(
            event,
            info.session_id,
            info.run_id,
            agent=info.agent,
            turn=info.turn,
            mode=info.mode,
            previous_run_id=info.previous_run_id,
            executor_id=executor_id(),
        )

    def committed(self, step_count: int, applied: bool) -> None:
        """A step body committed iteration ``step_count`` (``applied``: not already there)."""
        self.executing(re_executed=not applied)
        if not applied or step_count <= 0:
            return  # step 0 is the run's genesis checkpoint, announced as the start
        with self._lock:
            started = self._step_started.pop(step_count, None)
            if self._step_span_step == step_count:
                self._end_step_span()
        duration = round((time.monotonic() - started) * 1000, 1) if started is not None else None
        lifecycle.log_event(
            "step_committed",
            self.info.session_id,
            self.info.run_id,
            step=step_count,
            duration_ms=duration,
            note=None if started is not None else "duration unknown: the step began before a recovery",
        )

    @contextmanager
    def llm_call(self, step: int, model: str) -> Iterator[LLMCall]:
        """Around the model call of LLM step ``step`` (its body runs here)."""
        self.executing()
        with self._lock:
            self._executed_step = step
            self._current_step = step
            parent = self._step_span_for(step)
        span = None
        if self.traced:
            span = tracer().start_span(
                f"chat {model}",
                context=trace.set_span_in_context(parent),
                kind=SpanKind.CLIENT,
                attributes=clean_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.request.model": model,
                        "gen_ai.provider.name": provider_name(model),
                        "gen_ai.agent.name": self.info.agent,
                        **self._ids,
                        "helix.step": step,
                    }
                ),
            )
        try:
            yield LLMCall(span)
        except BaseException as exc:
            if span is not None:
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
            raise
        finally:
            if span is not None:
                span.end()

    @contextmanager
    def tool_call(self, call_id: str, tool_name: str) -> Iterator[ToolCall]:
        """Around one tool execution (a step body that runs here)."""
        self.executing()
        with self._lock:
            parent = self._step_span_for(self._current_step) if self._current_step > 0 else self.run_span
        span = None
        if self.traced:
            span = tracer().start_span(
                f"execute_tool {tool_name}",
                context=trace.set_span_in_context(parent or trace.INVALID_SPAN),
                kind=SpanKind.INTERNAL,
                attributes=clean_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool_name,
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.type": "function",
                        **self._ids,
                        "helix.step": self._current_step,
                    }
                ),
            )
        try:
            yield ToolCall(span)
        finally:
            if span is not None:
                span.end()

    def finalized(
        self, status: str, *, step_count: int, applied: bool, error: str | None = None, pending_ids: Sequence[str] = ()
    ) -> None:
        """The finalize body committed the last iteration with the run's final status."""
        self.committed(step_count, applied)
        info = self.info
        duration = round((time.monotonic() - self._started) * 1000, 1)
        if status == "suspended_client_tool":
            lifecycle.log_event(
                "run_suspended", info.session_id, info.run_id, steps=step_count, waiting_for=list(pending_ids)
            )
            return
        event = {"completed": "run_completed", "failed": "run_failed"}.get(status, f"run_{status}")
        level = logging.WARNING if status == "failed" else logging.INFO
        lifecycle.log_event(
            event,
            info.session_id,
            info.run_id,
            level,
            steps=step_count,
            duration_ms=duration if not self.recovered else None,
            error=error,
        )

    def failed(self, error: str) -> None:
        """The run failed outside the loop's own paths (an unexpected error, recorded by ``fail_run``)."""
        info = self.info
        lifecycle.log_event("run_failed", info.session_id, info.run_id, logging.WARNING, error=error)

    # --- spans (callers hold the lock) ----------------------------------------------------------

    def _parent_for_step(self) -> Span:
        if self._step_span is not None:
            return self._step_span
        return self.run_span or trace.INVALID_SPAN

    def _step_span_for(self, step: int) -> Span:
        """The span of iteration ``step``, opened on first use here (replayed iterations get none)."""
        self._step_started.setdefault(step, time.monotonic())
        if self._step_span_step == step and self._step_span is not None:
            return self._step_span
        self._end_step_span()
        self._step_span_step = step
        if not self.traced:
            return trace.INVALID_SPAN
        self._step_span = tracer().start_span(
            f"step {step}",
            context=trace.set_span_in_context(self.run_span or trace.INVALID_SPAN),
            attributes={**self._ids, "helix.step": step, "gen_ai.agent.name": self.info.agent},
        )
        return self._step_span

    def _end_step_span(self) -> None:
        if self._step_span is not None:
            self._step_span.end()
        self._step_span = None
        self._step_span_step = None


class _NoopObserver(RunObserver):
    """Observes nothing: what runs get when no tracer provider is set and lifecycle logs are off."""

    def __init__(self) -> None:
        super().__init__(RunInfo("", "", "", "", 0, ""), traced=False, logged=False)

    def llm_step_returned(self, step: int) -> None:
        """Nothing to count."""

    @contextmanager
    def hitl_wait(self, call_ids: Sequence[str], *, continuation: bool = False) -> Iterator[HitlWait]:
        """No span."""
        yield HitlWait(None)

    @contextmanager
    def rate_limit_wait(self, limit_name: str, step: int) -> Iterator[None]:
        """No span."""
        yield

    def close(self, status: str, *, error: str | None = None, pending_ids: Sequence[str] = ()) -> None:
        """Nothing open."""

    def executing(self, *, re_executed: bool = False) -> None:
        """Nothing to announce."""

    def committed(self, step_count: int, applied: bool) -> None:
        """Nothing to log."""

    @contextmanager
    def llm_call(self, step: int, model: str) -> Iterator[LLMCall]:
        """No span."""
        yield LLMCall(None)

    @contextmanager
    def tool_call(self, call_id: str, tool_name: str) -> Iterator[ToolCall]:
        """No span."""
        yield ToolCall(None)

    def finalized(
        self, status: str, *, step_count: int, applied: bool, error: str | None = None, pending_ids: Sequence[str] = ()
    ) -> None:
        """Nothing to log."""

    def failed(self, error: str) -> None:
        """Nothing to log."""


NOOP: RunObserver = _NoopObserver()
"""The observer of runs nobody observes (and of code running outside a run)."""

_current: ContextVar[RunObserver | None] = ContextVar("helix_dbos_run_observer", default=None)


def current() -> RunObserver:
    """The observer of the run this code belongs to (:data:`NOOP` outside a run)."""
    return _current.get() or NOOP


@contextmanager
def observe_run(info: RunInfo) -> Iterator[RunObserver]:
    """Observe one execution of a run for the duration of the block (workflow code)."""
    observer = NOOP
    logged = lifecycle.enabled()
    traced = tracing_active()
    if traced or logged:
        observer = RunObserver(info, traced=traced, logged=logged)
    token = _current.set(observer)
    try:
        yield observer
    finally:
        _current.reset(token)


__all__ = ["NOOP", "HitlWait", "LLMCall", "RunInfo", "RunObserver", "ToolCall", "current", "executor_id", "observe_run"]
