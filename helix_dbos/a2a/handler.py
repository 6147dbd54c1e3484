"""The A2A request handler of one served agent, backed by helix's durable state.

The official SDK's JSON-RPC dispatcher parses requests, checks the protocol version, speaks the 0.3
method names too, and turns :class:`~a2a.utils.errors.A2AError` into JSON-RPC errors; this handler
implements its :class:`~a2a.server.request_handlers.RequestHandler` on the executor, so there is no
second task store: a task is read from the run and session records every time (:mod:`.tasks`), and
any server process on the database answers for any task.

- ``SendMessage`` (``message/send``): the message's ``contextId`` names the session (without one,
  the session derives from the message id and the caller, like a keyed start); a new session or a
  completed one starts a run under the idempotency key ``a2a:{messageId}``, so a message sent again
  (a client retrying, a recovered parent) finds the run it started instead of starting another; an
  interrupted session is resumed. A task or context of another tenant (:mod:`helix_dbos.tenancy`)
  is not found; a new session is the caller's tenant's. The answer waits until the run ends or waits for input, unless
  the request asks ``returnImmediately``.
- ``SendStreamingMessage`` (``message/stream``) and ``SubscribeToTask``: the task, then the run's
  durable stream as events (text deltas appended to the ``text`` artifact, state changes as status
  updates), ending with the output artifact and the final (or input-required) status.
- ``CancelTask`` (``tasks/cancel``): aborts the run (``executor.abort``); a run that already ended
  is not cancelable.
- Push notifications and the extended card are not offered (the card says so): unsupported.

Blocking executor calls run in the service's thread pool, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from helix_dbos.a2a.tasks import TERMINAL_STATES, TEXT_ARTIFACT_ID, build_task, message_text, output_artifact
from helix_dbos.errors import HelixError, SessionNotFoundError, public_error_message
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.ids import session_id_for_key
from helix_dbos.service.schemas import SESSION_ID_PATTERN
from helix_dbos.store.base import RunRecord
from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import TextDeltaChunk
from helix_dbos.tenancy import DEFAULT_TENANT

T = TypeVar("T")
BlockingCall = Callable[..., Awaitable[Any]]
"""``await call(fn, *args)``: run a blocking executor call off the event loop (the service's pool)."""

SCOPE_STATE_KEY = "helix_scope"
"""Where the route puts the caller's scope (``principal_scope``) in the call context's state."""
TENANT_STATE_KEY = "helix_tenant"
"""Where the route puts the caller's tenant: a task or context of another tenant is not found."""
MAX_WAIT_SECONDS = 300.0
"""How long a blocking ``SendMessage`` waits for its run before answering with the task as it is."""
POLL_SECONDS = 0.2
"""How often a wait or a stream looks at the run's state."""

_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_NOT_FOUND_CODES = frozenset({"state_session_not_found", "state_checkpoint_not_found"})
_PARAMS_CODES = frozenset({"state_agent_mismatch", "validation_invalid_input", "conflicting_options"})


def a2a_error(exc: HelixError) -> A2AError:
    """A helix error as the protocol's error: its code kept in ``data`` (the message made safe to show)."""
    message = public_error_message(exc.message)
    data = {"code": exc.code, "retryable": exc.retryable}
    if exc.code in _NOT_FOUND_CODES:
        return TaskNotFoundError(message=message, data=data)
    if exc.code in _PARAMS_CODES:
        return InvalidParamsError(message=message, data=data)
    return InvalidRequestError(message=message, data=data)


class HelixA2ARequestHandler(RequestHandler):
    """A2A requests for one agent, answered from and written to helix's durable state."""

    def __init__(self, executor: DBOSAgentExecutor, agent: str, card: AgentCard, call: BlockingCall) -> None:
        self.executor = executor
        self.agent = agent
        self.card = card
        self._call = call

    # -- blocking helpers (run in the pool) -------------------------------------------------------------
    def _start(self, message: Message, scope: str, tenant: str) -> RunRecord:
        text = message_text(message)
        if not message.message_id:
            raise InvalidParamsError(message="message.messageId is required")
        if not text.strip():
            raise InvalidParamsError(message="the message has no text or data part")
        key = f"a2a:{message.message_id}"
        session_id = message.context_id or session_id_for_key(key, scope)
        if not _SESSION_ID.fullmatch(session_id):
            raise InvalidParamsError(message="contextId must be letters, digits and ._:- (200 at most)")
        reads = self.executor.reads
        session = reads.get_session(session_id)
        if message.task_id:
            run = reads.get_run(message.task_id)
            if run is None or run.session_id != session_id:
                raise TaskNotFoundError(message=f"task {message.task_id!r} is not a task of context {session_id!r}")
        if session is not None and (session.agent_type != self.agent or session.tenant != tenant):
            raise InvalidParamsError(message=f"context {session_id!r} belongs to another agent or caller")
        if session is not None and session.status in ("interrupted", "paused"):
            handle = self.executor.resume(self.agent, session_id, text)
        else:
            handle = self.executor.execute(
                self.agent, {"message": text}, session_id=session_id, idempotency_key=key, tenant=tenant
            )
        run = reads.get_run(handle.run_id)
        assert run is not None, "a started run has a record"
        return run

    def _task(self, run_id: str, tenant: str) -> Task:
        reads = self.executor.reads
        run = reads.get_run(run_id)
        session = reads.get_session(run.session_id) if run is not None else None
        if run is None or session is None or session.agent_type != self.agent or session.tenant != tenant:
            raise TaskNotFoundError(message=f"no task {run_id!r} of agent {self.agent!r}")
        pending = [c for c in reads.list_pending_tool_calls(run.session_id) if c.run_id == run.run_id]
        return build_task(run, session, pending)

    def _cancel(self, run_id: str, tenant: str) -> Task:
        task = self._task(run_id, tenant)
        if task.status.state in TERMINAL_STATES:
            raise TaskNotCancelableError(message=f"task {run_id!r} already ended")
        self.executor.abort(task.context_id, "canceled over A2A")
        return self._task(run_id, tenant)

    def _list(self, context_id: str, tenant: str) -> list[Task]:
        reads = self.executor.reads
        session = reads.get_session(context_id)
        if session is None or session.agent_type != self.agent or session.tenant != tenant:
            return []
        return [self._task(run.run_id, tenant) for run in reversed(reads.list_runs(context_id))]  # newest first

    async def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            result: T = await self._call(fn, *args)
        except HelixError as exc:
            raise a2a_error(exc) from exc
        return result

    # -- the protocol's operations ---------------------------------------------------------------------
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        tenant = _tenant(context)
        run = await self._guarded(self._start, params.message, _scope(context), tenant)
        if params.configuration.return_immediately:
            return await self._guarded(self._task, run.run_id, tenant)
        deadline = time.monotonic() + MAX_WAIT_SECONDS
        while True:
            task = await self._guarded(self._task, run.run_id, tenant)
            if _settled(task) or time.monotonic() >= deadline:
                return task
            await asyncio.sleep(POLL_SECONDS)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        tenant = _tenant(context)
        run = await self._guarded(self._start, params.message, _scope(context), tenant)
        async for event in self._follow(run, tenant):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        tenant = _tenant(context)
        task = await self._guarded(self._task, params.id, tenant)
        if task.status.state in TERMINAL_STATES:
            raise UnsupportedOperationError(message=f"task {params.id!r} already ended: GetTask reads it")
        run = await self._guarded(self.executor.reads.get_run, params.id)
        assert run is not None
        async for event in self._follow(run, tenant):
            yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        return await self._guarded(self._task, params.id, _tenant(context))

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        if not params.context_id:
            raise InvalidParamsError(message="ListTasks needs a contextId (tasks are listed per context)")
        tasks = await self._guarded(self._list, params.context_id, _tenant(context))
        if not params.include_artifacts:
            for task in tasks:
                del task.artifacts[:]
        return ListTasksResponse(tasks=tasks, page_size=len(tasks), total_size=len(tasks))

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        return await self._guarded(self._cancel, params.id, _tenant(context))

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError(message="this agent has no extended card")

    # -- following a run --------------------------------------------------------------------------------
    async def _follow(self, run: RunRecord, tenant: str) -> AsyncIterator[Event]:
        """The task, then its stream's text and status changes, until it ends or waits for input.

        The chunks come from the session's durable stream (from the run's first chunk); the state
        from the run's records, looked at between chunks, so a run whose stream stays quiet (waiting
        for an approval) still reaches its input-required status.
        """
        task = await self._guarded(self._task, run.run_id, tenant)
        yield task
        session = await self._guarded(self.executor.reads.require_session, run.session_id)
        chunks: asyncio.Queue[ChunkRecord | None] = asyncio.Queue()
        reader = asyncio.create_task(self._read(session.stream_id, run.stream_start_sequence, chunks))
        state = task.status.state
        appended = False
        try:
            while True:
                record = await _next(chunks, POLL_SECONDS)
                if isinstance(record, ChunkRecord):
                    chunk = record.chunk
                    if _own_text(run, chunk):
                        assert isinstance(chunk, TextDeltaChunk)
                        yield self._text(run, chunk.content, append=appended)
                        appended = True
                    continue
                task = await self._guarded(self._task, run.run_id, tenant)
                if task.status.state != state and not _settled(task):
                    state = task.status.state
                    yield _status_event(task)
                if _settled(task):
                    while (rest := chunks.get_nowait() if not chunks.empty() else None) is not None:
                        if _own_text(run, rest.chunk):
                            assert isinstance(rest.chunk, TextDeltaChunk)
                            yield self._text(run, rest.chunk.content, append=appended)
                            appended = True
                    if task.status.state == TaskState.TASK_STATE_COMPLETED:
                        session = await self._guarded(self.executor.reads.require_session, run.session_id)
                        yield TaskArtifactUpdateEvent(
                            task_id=run.run_id,
                            context_id=run.session_id,
                            artifact=output_artifact(session),
                            last_chunk=True,
                        )
                    yield _status_event(task)
                    return
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _read(self, stream_id: str, after: int, into: asyncio.Queue[ChunkRecord | None]) -> None:
        """Copy the stream's records into ``into`` until it ends (a stream that broke ends it too)."""
        try:
            records = await self.executor.streams.records(stream_id, after_sequence=after)
            if records is None:
                return
            async for record in records:
                into.put_nowait(record)
        except (HelixError, SessionNotFoundError):
            pass  # the run's records still say how it ended: the poll reads them
        finally:
            into.put_nowait(None)

    def _text(self, run: RunRecord, text: str, *, append: bool) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id=run.run_id,
            context_id=run.session_id,
            artifact=Artifact(artifact_id=TEXT_ARTIFACT_ID, name="text", parts=[Part(text=text)]),
            append=append,
        )


async def _next(chunks: asyncio.Queue[ChunkRecord | None], timeout: float) -> ChunkRecord | None:
    """The next record, or ``None`` when none came within ``timeout`` (or the stream ended)."""
    try:
        return await asyncio.wait_for(chunks.get(), timeout)
    except TimeoutError:
        return None


def _own_text(run: RunRecord, chunk: object) -> bool:
    """A text delta of the run's own agent (a sub-agent's chunks, mirrored into the stream, are not the answer).

    The run's steps name their chunks by run id; the session id is accepted too, as the chunk's
    field is documented.
    """
    return isinstance(chunk, TextDeltaChunk) and bool(chunk.content) and chunk.agent_id in (run.run_id, run.session_id)


def _settled(task: Task) -> bool:
    """Ended, or waiting for input: where a blocking send answers and a stream closes."""
    return task.status.state in TERMINAL_STATES or task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


def _status_event(task: Task) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=task.status)


def _scope(context: ServerCallContext) -> str:
    return str(context.state.get(SCOPE_STATE_KEY, "anonymous"))


def _tenant(context: ServerCallContext) -> str:
    return str(context.state.get(TENANT_STATE_KEY, DEFAULT_TENANT))


__all__ = [
    "MAX_WAIT_SECONDS",
    "POLL_SECONDS",
    "SCOPE_STATE_KEY",
    "TENANT_STATE_KEY",
    "HelixA2ARequestHandler",
    "a2a_error",
]
