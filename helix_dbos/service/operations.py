"""The operations behind the service's routes: blocking executor calls, run off the event loop.

:class:`ServiceOperations` holds what a route does beyond parsing and answering: the deterministic
session of a keyed start, the views built from the executor's reads (``executor.reads``: the service
never touches the store), and the result of an aborted run. A request that does not fit the session
(an unknown session, agent or checkpoint, another agent's session) is refused by the executor itself
with the error that maps to its 404 or 409. Error text leaving here for a client goes through
:func:`~helix_dbos.errors.public_error_message`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from helix_dbos.double_text import DoubleTextReceipt
from helix_dbos.errors import (
    AgentNotFoundError,
    HelixError,
    ResultTimeoutError,
    RunNotFinishedError,
    SessionNotFoundError,
    public_error_message,
)
from helix_dbos.runtime.executor import DBOSAgentExecutor, jsonable
from helix_dbos.runtime.ids import session_id_for_key
from helix_dbos.service.schemas import (
    AbortAccepted,
    CanResumeView,
    ChatRequest,
    ForkRequest,
    ForkView,
    InterruptAccepted,
    PendingToolCallView,
    ResumeRequest,
    RetryRequest,
    RunResultView,
    RunView,
    SessionSnapshot,
    StartRunRequest,
    ToolResultAccepted,
)
from helix_dbos.session import SubmitToolResult
from helix_dbos.store.base import PaginatedCheckpoints, PaginatedMessages, RunRecord, SessionRecord

T = TypeVar("T")

"""Backoff between attempts of an answer waiting for its tool call to be registered (then 0.5 s)."""


def served_agent(executor: DBOSAgentExecutor, name: object, how_to_name: str) -> str:
    """The agent a protocol's request names, or the service's only agent when it names none.

    The chat protocols (the AI SDK's, AG-UI) carry no agent of their own: a client names one in a
    field the protocol leaves free, and a service of one agent needs no name. ``how_to_name`` tells
    the client where its protocol takes the name, for the refusal when several agents are served.
    """
    names = executor.registry.names()
    if name is None:
        if len(names) == 1:
            return names[0]
        raise HelixError(
            f"Name the agent: this service serves {sorted(names)}; {how_to_name}",
            code="validation_error",
            retryable=False,
        )
    if not isinstance(name, str) or executor.registry.get(name) is None:
        raise AgentNotFoundError(str(name), names)
    return name


def _safe_error(error: str | None) -> str | None:
    return public_error_message(error) if error else None


def _run_view(run: RunRecord) -> RunView:
    return RunView(
        run_id=run.run_id,
        turn=run.turn,
        status=run.status,
        mode=run.mode,
        step_count=run.step_count,
        started_at=run.started_at,
        completed_at=run.completed_at,
        error=_safe_error(run.error),
        previous_run_id=run.previous_run_id,
        stream_start_sequence=run.stream_start_sequence,
    )


class ServiceOperations:
    """The operations behind the routes: blocking executor calls, run off the event loop."""

    def __init__(self, executor: DBOSAgentExecutor, *, blocking_threads: int, result_waiters: int) -> None:
        self.executor = executor
        self._pool = ThreadPoolExecutor(max_workers=blocking_threads, thread_name_prefix="helix-http")
        self._waits = ThreadPoolExecutor(max_workers=result_waiters, thread_name_prefix="helix-http-wait")

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call in the service's pool."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def wait(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a call that waits for a run (up to a client-chosen timeout) in the wait pool."""
        return await asyncio.get_running_loop().run_in_executor(self._waits, functools.partial(fn, *args))

    def close(self) -> None:
        """Stop the pools (requests in flight finish; nothing new is accepted)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._waits.shutdown(wait=False, cancel_futures=True)

    # -- blocking helpers (run in the pool) ------------------------------------------------------------
    def require_session(self, session_id: str) -> SessionRecord:
        return self.executor.reads.require_session(session_id)

    def submit_once(self, session_id: str, submission: SubmitToolResult) -> Any:
        # The executor refuses an answer that does not fit the pending call (409 state_conflict).
        return self.executor.submit_tool_result(session_id, submission)

    def run_status(self, run_id: str) -> Any:
        run = self.executor.reads.get_run(run_id)
        return run.status if run is not None else "running"

    def start(self, body: StartRunRequest, scope: str, tenant: str) -> tuple[str, str, Any, DoubleTextReceipt | None]:
        session_id = body.session_id
        if session_id is None and body.idempotency_key is not None:
            session_id = session_id_for_key(body.idempotency_key, scope)
        handle = self.executor.execute(
            body.agent,
            body.input,
            session_id=session_id,
            idempotency_key=body.idempotency_key,
            priority=body.priority,
            tenant=tenant,
            double_text=body.double_text,
        )
        return handle.session_id, handle.run_id, self.run_status(handle.run_id), handle.double_text

    def resume(self, session_id: str, body: ResumeRequest) -> tuple[str, str, Any]:
        handle = self.executor.resume(body.agent, session_id, body.message, priority=body.priority)
        return handle.session_id, handle.run_id, self.run_status(handle.run_id)

    def retry(self, session_id: str, body: RetryRequest) -> tuple[str, str, Any]:
        handle = self.executor.retry(
            session_id, checkpoint_id=body.checkpoint_id, message=body.message, priority=body.priority
        )
        return handle.session_id, handle.run_id, self.run_status(handle.run_id)

    def fork(self, session_id: str, body: ForkRequest) -> ForkView:
        result = self.executor.fork(
            session_id,
            body.checkpoint_id,
            new_session_id=body.new_session_id,
            message=body.message,
            message_mode=body.message_mode,
            state=body.state,
            state_patch=body.state_patch,
        )
        return ForkView(
            session_id=result.session_id,
            created=result.created,
            source_session_id=result.source_session_id,
            checkpoint_id=result.checkpoint_id,
            fork_checkpoint_id=result.fork_checkpoint_id,
            status=result.session.status,
            step_count=result.session.step_count,
            message_count=result.session.message_count,
        )

    def snapshot(self, session_id: str) -> SessionSnapshot:
        session = self.require_session(session_id)
        reads = self.executor.reads
        run = reads.get_current_run(session_id)
        pending = reads.list_pending_tool_calls(session_id)
        verdict = reads.can_resume(session_id)
        return SessionSnapshot(
            session_id=session.session_id,
            agent=session.agent_type,
            status=session.status,
            turn=session.turn,
            step_count=session.step_count,
            message_count=session.message_count,
            output=jsonable(session.output),
            error=_safe_error(session.error),
            aborted=session.aborted,
            interrupt_requested=session.interrupt_requested,
            current_run=_run_view(run) if run is not None else None,
            pending_tool_calls=[
                PendingToolCallView(
                    tool_call_id=call.tool_call_id,
                    session_id=call.session_id,
                    tool_name=call.tool_name,
                    kind=call.kind,
                    arguments=call.arguments,
                    arguments_digest=call.arguments_digest,
                    deadline_ms=call.deadline_ms,
                    created_at=call.created_at,
                )
                for call in pending
            ],
            awaiting_client_tool=any(call.kind == "client" for call in pending),
            can_resume=CanResumeView(can_resume=verdict.can_resume, reason=verdict.reason),
            usage=self.executor.get_usage_summary(session_id),
            created_at=session.created_at,
            updated_at=session.updated_at,
        )

    def messages(self, session_id: str, offset: int, limit: int) -> PaginatedMessages:
        self.require_session(session_id)
        return self.executor.reads.get_messages(session_id, offset=offset, limit=limit)

    def checkpoints(self, session_id: str, offset: int, limit: int) -> PaginatedCheckpoints:
        self.require_session(session_id)
        return self.executor.list_checkpoints(session_id, offset=offset, limit=limit)

    def runs(self, session_id: str) -> list[RunView]:
        self.require_session(session_id)
        return [_run_view(run) for run in self.executor.list_runs(session_id)]

    def result(self, session_id: str, timeout_seconds: float) -> RunResultView:
        session = self.require_session(session_id)
        handle = self.executor.get_handle(session_id)
        if handle is None:
            raise SessionNotFoundError(session_id)
        if session.aborted and session.run_id == handle.run_id:
            # The store says so first (abort writes it before cancelling the workflow), and the
            # workflow's own end (cancelled, or parked before the abort) does not carry the reason.
            return RunResultView(
                session_id=session_id,
                run_id=handle.run_id,
                status="failed",
                error=_safe_error(session.error) or "aborted",
                aborted=True,
                abort_reason=session.abort_reason,
            )
        try:
            result = handle.result(timeout_seconds=timeout_seconds)
        except RunNotFinishedError as exc:  # a wait that ran out, not a model failure
            raise ResultTimeoutError(session_id, handle.run_id, timeout_seconds) from exc
        return RunResultView(
            session_id=session_id,
            run_id=handle.run_id,
            status=result.status,
            output=jsonable(result.output),
            error=_safe_error(result.error),
            suspended=result.suspended,
        )

    def interrupt(self, session_id: str, reason: str | None) -> InterruptAccepted:
        requested = self.executor.interrupt(session_id, reason)
        return InterruptAccepted(session_id=session_id, requested=requested)

    def abort(self, session_id: str, reason: str | None) -> AbortAccepted:
        self.executor.abort(session_id, reason)
        return AbortAccepted(session_id=session_id)

    async def submit(self, session_id: str, submission: SubmitToolResult) -> ToolResultAccepted:
        # No waiting for an unknown call id: a run registers a call as pending before it streams the
        # call's tool_start (or shows it in a snapshot or the transcript), so a call id a client can
        # know is always registered, and an unknown one is refused at once, holding no thread.
        handle = await self.call(self.submit_once, session_id, submission)
        return ToolResultAccepted(
            session_id=session_id,
            tool_call_id=submission.tool_call_id,
            run_id=handle.run_id if handle is not None else None,
        )

    def chat(self, body: ChatRequest, tenant: str) -> tuple[str, str, DoubleTextReceipt | None]:
        message = {"message": body.message}
        handle = self.executor.execute(
            body.agent, message, session_id=body.session_id, tenant=tenant, double_text=body.double_text
        )
        return handle.session_id, handle.run_id, handle.double_text

    def chat_start(self, session_id: str) -> tuple[str, int]:
        """The session's stream id and the current run's first stream position."""
        session = self.require_session(session_id)
        run = self.executor.reads.get_current_run(session_id)
        return session.stream_id, run.stream_start_sequence if run is not None else 0

    # -- streams -------------------------------------------------------------------------------------
    async def open_stream(self, stream_id: str, after: int) -> Any:
        records = await self.executor.streams.records(stream_id, after_sequence=after)
        if records is None:
            raise HelixError(
                f"No stream {stream_id!r} is available on this server (yet)", code="transport_error", retryable=True
            )
        return records


__all__ = ["ServiceOperations", "served_agent"]
