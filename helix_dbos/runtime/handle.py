"""``AgentExecutionHandle``: a run's ids plus the executor calls that concern it.

The handle is deliberately thin: it holds a run record and an agent name and asks the executor,
through its public methods only, for everything else. So a handle can be rebuilt from ids (the CLI
does) and the executor stays the one place that knows how runs are started, awaited and stopped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Protocol

from helix_dbos.agent import AgentHooks
from helix_dbos.double_text import DoubleTextReceipt
from helix_dbos.errors import SessionNotFoundError
from helix_dbos.session import (
    AbortedOutcome,
    AgentResult,
    AgentState,
    CanResumeResult,
    CompletedOutcome,
    FailedOutcome,
    InterruptedOutcome,
    ResumeOptions,
    RetryOptions,
    RunOutcome,
    SendInput,
    SuspendedAwaitingChildrenOutcome,
    SuspendedChildWait,
    SuspendedClientToolOutcome,
)
from helix_dbos.store.base import PendingToolCall, RunRecord, SessionRecord
from helix_dbos.stream.chunks import StreamChunk
from helix_dbos.tool import AbortSignal
from helix_dbos.usage import UsageSummary


class RunControl(Protocol):
    """The executor's public methods a handle uses (``DBOSAgentExecutor`` implements them)."""

    def wait_for_result(self, run: RunRecord, agent_name: str, timeout_seconds: float | None = None) -> AgentResult: ...

    def get_state(self, session_id: str) -> AgentState | None: ...

    def get_session(self, session_id: str) -> SessionRecord | None: ...

    def list_pending_tool_calls(self, session_id: str) -> list[PendingToolCall]: ...

    async def read_stream(self, session_id: str, from_sequence: int = 0) -> AsyncIterator[StreamChunk] | None: ...

    def abort(self, session_id: str, reason: str | None = None) -> None: ...

    def get_usage_summary(
        self, session_id: str, run_id: str | None = None, *, include_children: bool = True
    ) -> UsageSummary: ...

    def can_resume(self, session_id: str) -> CanResumeResult: ...

    def resume(
        self, agent: str, session_id: str, message: SendInput | None = None, *, hooks: AgentHooks | None = None
    ) -> AgentExecutionHandle: ...

    def retry(
        self,
        session_id: str,
        *,
        checkpoint_id: str | None = None,
        message: SendInput | None = None,
        hooks: AgentHooks | None = None,
    ) -> AgentExecutionHandle: ...


class AgentExecutionHandle:
    """A run in flight (or finished): wait for its result, read its state, stream its chunks."""

    def __init__(self, executor: RunControl, run: RunRecord, agent_name: str, hooks: AgentHooks | None = None) -> None:
        self._executor = executor
        self._run = run
        self.agent_name = agent_name
        self.hooks = hooks
        """The per-call hooks this handle's run was started with; ``resume`` and ``retry`` pass them on."""
        self.double_text: DoubleTextReceipt | None = None
        """From ``execute``: what became of the message (started, queued, steering) and the run that carries it."""

    @property
    def session_id(self) -> str:
        """The session this run belongs to."""
        return self._run.session_id

    @property
    def run_id(self) -> str:
        """The run id (equal to its DBOS workflow id)."""
        return self._run.run_id

    @property
    def workflow_id(self) -> str:
        """The DBOS workflow id."""
        return self._run.workflow_id

    def result(self, timeout_seconds: float | None = None) -> AgentResult:
        """Block until the run ends and return its result (output typed by the agent's schema)."""
        return self._executor.wait_for_result(self._run, self.agent_name, timeout_seconds)

    async def result_async(self, timeout_seconds: float | None = None) -> AgentResult:
        """Async twin of :meth:`result`."""
        return await asyncio.to_thread(self.result, timeout_seconds)

    def get_state(self) -> AgentState:
        """The session's current state (transcript, custom state, status)."""
        state = self._executor.get_state(self.session_id)
        if state is None:
            raise SessionNotFoundError(self.session_id)
        return state

    async def get_state_async(self) -> AgentState:
        """Async twin of :meth:`get_state`."""
        return await asyncio.to_thread(self.get_state)

    async def stream(self) -> AsyncIterator[StreamChunk] | None:
        """Chunks of the session's stream from the start of this run (live until the run ends)."""
        return await self._executor.read_stream(self._run.session_id, self._run.stream_start_sequence)

    def outcome(self, timeout_seconds: float | None = None) -> RunOutcome:
        """Wait for the run, then describe how it ended with its final state (seed 002 ``RunOutcome``)."""
        result = self.result(timeout_seconds)
        state = self.get_state()
        session = self._executor.get_session(self.session_id)
        if session is not None and session.aborted and session.run_id == self.run_id:
            # Checked first: an aborted parked run's workflow had already ended as suspended.
            return AbortedOutcome(final_state=state, reason=session.abort_reason)
        if result.status == "completed":
            return CompletedOutcome(final_state=state, output=result.output)
        if result.status == "suspended_client_tool":
            pending = {
                c.tool_call_id: c.model_dump(mode="json", include={"tool_name", "kind", "arguments", "deadline_ms"})
                for c in self._executor.list_pending_tool_calls(self.session_id)
            }
            return SuspendedClientToolOutcome(final_state=state, pending_client_tool_calls=pending)
        if result.status == "suspended_awaiting_children":
            waits = [SuspendedChildWait.model_validate(w) for w in (result.suspended or {}).get("children", [])]
            awaiting = {w.parent_tool_call_id: w for w in waits}
            return SuspendedAwaitingChildrenOutcome(final_state=state, suspended_awaiting_children=awaiting)
        if result.status == "interrupted":
            reason = session.interrupt_context.reason if session and session.interrupt_context else None
            return InterruptedOutcome(final_state=state, reason=reason)
        return FailedOutcome(final_state=state, error=result.error or "failed")

    def usage(self) -> UsageSummary:
        """What this run has used and cost so far, its sub-agents included (committed steps; final once it ended)."""
        return self._executor.get_usage_summary(self.session_id, self.run_id)

    def session_usage(self, *, include_children: bool = True) -> UsageSummary:
        """What the whole session has used and cost, every run (and its sub-agents') included."""
        return self._executor.get_usage_summary(self.session_id, include_children=include_children)

    def abort(self, reason: str | None = None) -> None:
        """Abort this run's session (see :meth:`DBOSAgentExecutor.abort`)."""
        self._executor.abort(self.session_id, reason)

    def can_resume(self) -> CanResumeResult:
        """Whether the session can be resumed, and why not."""
        return self._executor.can_resume(self.session_id)

    def resume(self, options: ResumeOptions | None = None) -> AgentExecutionHandle:
        """Continue the interrupted or suspended session in a new run (with this handle's per-call hooks)."""
        message = (options or ResumeOptions()).message
        return self._executor.resume(self.agent_name, self.session_id, message, hooks=self.hooks)

    def retry(self, options: RetryOptions | None = None) -> AgentExecutionHandle:
        """Start again from a checkpoint (the latest by default), with this handle's per-call hooks."""
        opts = options or RetryOptions()
        handle = self._executor.retry(
            self.session_id, checkpoint_id=opts.checkpoint_id, message=opts.message, hooks=self.hooks
        )
        if opts.abort_signal is not None:
            _abort_when_tripped(handle, opts.abort_signal)
        return handle


def _abort_when_tripped(handle: AgentExecutionHandle, signal: AbortSignal) -> None:
    """``RetryOptions.abort_signal``: abort the retried run if the caller trips the signal before it ends.

    A daemon thread waits on the signal and checks, once a second, whether the run finished (then it
    stops watching): a signal tripped after the run ended aborts nothing.
    """

    def watch() -> None:
        while not signal.wait(1.0):
            session = handle._executor.get_session(handle.session_id)
            if session is None or session.status != "active":
                return
        handle.abort(signal.reason or "aborted by the caller's abort signal")

    threading.Thread(target=watch, name=f"helix-retry-abort-{handle.run_id}", daemon=True).start()


__all__ = ["AgentExecutionHandle", "RunControl"]
