"""The durable agent service: ``create_app(executor, ...)`` -> a FastAPI app (HTTP + SSE).

Routes, and the seeds' ``AgentServer`` operations they implement (seed 001 "Agent Server"):

===========================================  ==================================================
Route                                        Seeds' operation / executor call
===========================================  ==================================================
``POST /v1/runs``                            ``/start``: ``execute``
``GET  /v1/sessions/{id}``                   ``/status``: session, current run, pending calls
``GET  /v1/sessions/{id}/stream``            ``/sse``: resumable (``Last-Event-ID``)
``POST /v1/sessions/{id}/resume``            ``/resume``: ``resume``
``POST /v1/sessions/{id}/retry``             ``retry`` (seed 002 ``RetryOptions``)
``POST /v1/sessions/{id}/interrupt``         ``/interrupt``: ``interrupt``
``POST /v1/sessions/{id}/abort``             ``/abort``: ``abort``
``POST /v1/sessions/{id}/tool-results``      ``/submit-tool-result``: ``submit_tool_result``
``GET  /v1/sessions/{id}/result``            ``handle.result()`` of the current run
``GET  /v1/sessions/{id}/messages``          transcript page; ``/runs``: run records
``POST /v1/chat``                            chat handler ``POST /chat``
``GET  /v1/chat/{id}/stream``                ``GET /chat/{sessionId}/stream`` (current run)
``POST /v1/chat/{id}/tool-results``          ``POST /chat/{sessionId}/submit-tool-result``
``POST /v1/chat/{id}/interrupt`` / abort     ``POST /chat/{sessionId}/interrupt`` / ``abort``
``GET  /healthz``                            liveness (no authentication)
===========================================  ==================================================

The seeds' ``GET /workspace`` is not served: the DBOS runtime has no workspaces (seed 001).

**Fail-closed authentication** (see :mod:`helix_dbos.service.auth`): building the app raises
unless ``authenticate``, ``bearer_tokens`` or ``allow_unauthenticated=True`` is given, and every
route but ``/healthz`` and the OpenAPI schema and docs checks credentials *before* the request
body is even parsed, so an unauthenticated request gets a 401 and changes nothing.

**Stateless**: the app keeps no per-run state. Answers, interrupt flags and aborts are durable
writes that reach the run from any process on the same database (wake-ups go through
``DBOS.send``), so any number of server processes can sit behind one load balancer. Streams are
shared between processes when the executor's stream manager is durable
(:class:`~helix_dbos.stream.sql.SqlStreamManager`, what ``launch()`` uses); with the in-memory
one, read a run's stream from the process that runs it.

Executor calls block on the database, so they run in a thread pool owned by the app, never on
the event loop; waits for results use a pool of their own, so slow waits cannot starve other
requests.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the route signatures at runtime,
# and some of their annotations close over create_app's arguments (the result wait limit).
import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, TypeVar

from fastapi import Body, Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.routing import APIRoute, APIRouter
from fastapi.security import HTTPBearer
from sse_starlette import EventSourceResponse
from starlette.requests import ClientDisconnect

from helix_dbos.errors import HelixError, RunNotFinishedError, SessionNotFoundError
from helix_dbos.runtime.executor import DBOSAgentExecutor, jsonable
from helix_dbos.service.auth import AuthenticateHook, Authenticator
from helix_dbos.service.errors import (
    ERROR_RESPONSES,
    AgentNotFoundError,
    ResultTimeoutError,
    error_response,
    install_error_handlers,
    is_handled,
    unauthenticated_response,
    unexpected_error_response,
)
from helix_dbos.service.schemas import (
    AbortAccepted,
    AbortRequest,
    CanResumeView,
    ChatAccepted,
    ChatRequest,
    HealthView,
    InterruptAccepted,
    InterruptRequest,
    PendingToolCallView,
    ResumeRequest,
    RetryRequest,
    RunAccepted,
    RunResultView,
    RunView,
    SessionSnapshot,
    StartRunRequest,
    StreamView,
    ToolResultAccepted,
)
from helix_dbos.service.sse import event_source, parse_after, stream_info
from helix_dbos.session import SubmitToolResult
from helix_dbos.store.base import PaginatedMessages, RunRecord, SessionRecord

T = TypeVar("T")

API_DESCRIPTION = """
Durable AI agents on DBOS over HTTP and server-sent events. Every run is a DBOS workflow; every
answer, interrupt and abort is a durable write, so any server process on the database can take
any request.

| Route | Seeds' `AgentServer` operation |
| --- | --- |
| `POST /v1/runs` | `POST /start` |
| `GET /v1/sessions/{id}` | `GET /status` |
| `GET /v1/sessions/{id}/stream` | `GET /sse` (resume with `Last-Event-ID`) |
| `POST /v1/sessions/{id}/resume` | `POST /resume` |
| `POST /v1/sessions/{id}/interrupt` | `POST /interrupt` |
| `POST /v1/sessions/{id}/abort` | `POST /abort` |
| `POST /v1/sessions/{id}/tool-results` | `POST /submit-tool-result` |
| `POST /v1/chat`, `GET /v1/chat/{id}/stream` | chat handler `POST /chat`, `GET /chat/{sessionId}/stream` |
| `POST /v1/chat/{id}/tool-results`, `/interrupt`, `/abort` | chat handler `submit-tool-result`, `interrupt`, `abort` |

Every route but `/healthz` and these docs needs credentials (a 401 otherwise, and nothing changes).
Errors are `{"error": {"code", "message", "retryable"}}` with the seeds' error codes.
"""

SessionIdPath = Annotated[str, Path(description="The session id.")]


async def _read_limited_body(request: Request, limit: int) -> Response | None:
    """Read the body up to ``limit`` bytes (cached on the request for FastAPI); a 413 response beyond it.

    Done here rather than with FastAPI's ``max_body_size``, which answers before authentication and
    in plain text: this way an oversized body gets the JSON error shape, and only after the caller
    was authenticated.
    """
    too_large = error_response(413, "validation_error", f"Request body larger than {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return too_large
            chunks.append(chunk)
    except ClientDisconnect:
        return error_response(400, "validation_error", "The client disconnected while sending the body")
    request._body = b"".join(chunks)  # Starlette's own cache: FastAPI's body parsing reads it from here
    return None


def _guarded_route_class(authenticator: Authenticator, max_body_bytes: int | None) -> type[APIRoute]:
    """A route class that authenticates (and bounds the body) before FastAPI parses anything."""

    class AuthenticatedRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                try:
                    principal = await authenticator.authenticate(request)
                    if principal is None:
                        return unauthenticated_response()
                    request.state.principal = principal
                    if max_body_bytes is not None and request.method in ("POST", "PUT", "PATCH"):
                        refused = await _read_limited_body(request, max_body_bytes)
                        if refused is not None:
                            return refused
                    return await handler(request)
                except Exception as exc:
                    if is_handled(exc):
                        raise
                    # Answered here rather than by Starlette's last-resort handler, which re-raises
                    # into the server after responding (and so logs every such error twice). An
                    # authenticate hook that raises lands here too: denied, never let through.
                    return await unexpected_error_response(request, exc)

            return guarded

    return AuthenticatedRoute


def _run_view(run: RunRecord) -> RunView:
    return RunView(
        run_id=run.run_id,
        turn=run.turn,
        status=run.status,
        mode=run.mode,
        step_count=run.step_count,
        started_at=run.started_at,
        completed_at=run.completed_at,
        error=run.error,
        previous_run_id=run.previous_run_id,
        stream_start_sequence=run.stream_start_sequence,
    )


class _Service:
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
    def require_agent(self, name: str) -> str:
        if self.executor.registry.get(name) is None:
            raise AgentNotFoundError(name, self.executor.registry.names())
        return name

    def require_session(self, session_id: str) -> SessionRecord:
        session = self.executor.store.load_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    def run_status(self, run_id: str) -> Any:
        run = self.executor.store.get_run(run_id)
        return run.status if run is not None else "running"

    def start(self, body: StartRunRequest) -> tuple[str, str, Any]:
        agent = self.require_agent(body.agent)
        handle = self.executor.execute(
            agent, body.input, session_id=body.session_id, idempotency_key=body.idempotency_key
        )
        return handle.session_id, handle.run_id, self.run_status(handle.run_id)

    def resume(self, session_id: str, body: ResumeRequest) -> tuple[str, str, Any]:
        session = self.require_session(session_id)
        agent = self.require_agent(body.agent or session.agent_type)
        handle = self.executor.resume(agent, session_id, body.message)
        return handle.session_id, handle.run_id, self.run_status(handle.run_id)

    def retry(self, session_id: str, body: RetryRequest) -> tuple[str, str, Any]:
        session = self.require_session(session_id)
        self.require_agent(session.agent_type)
        handle = self.executor.retry(session_id, checkpoint_id=body.checkpoint_id, message=body.message)
        return handle.session_id, handle.run_id, self.run_status(handle.run_id)

    def snapshot(self, session_id: str) -> SessionSnapshot:
        session = self.require_session(session_id)
        store = self.executor.store
        run = store.get_current_run(session_id)
        pending = store.pending.open_calls(session_id)
        verdict = self.executor.can_resume(session_id)
        return SessionSnapshot(
            session_id=session.session_id,
            agent=session.agent_type,
            status=session.status,
            turn=session.turn,
            step_count=session.step_count,
            message_count=session.message_count,
            output=jsonable(session.output),
            error=session.error,
            aborted=session.aborted,
            interrupt_requested=session.interrupt_requested,
            current_run=_run_view(run) if run is not None else None,
            pending_tool_calls=[
                PendingToolCallView(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    kind=call.kind,
                    arguments=call.arguments,
                    arguments_digest=call.arguments_digest,
                    deadline_ms=call.deadline_ms,
                    created_at=call.created_at,
                )
                for call in pending
            ],
            can_resume=CanResumeView(can_resume=verdict.can_resume, reason=verdict.reason),
            created_at=session.created_at,
            updated_at=session.updated_at,
        )

    def messages(self, session_id: str, offset: int, limit: int) -> PaginatedMessages:
        self.require_session(session_id)
        return self.executor.store.get_messages(session_id, offset=offset, limit=limit)

    def runs(self, session_id: str) -> list[RunView]:
        self.require_session(session_id)
        return [_run_view(run) for run in self.executor.list_runs(session_id)]

    def result(self, session_id: str, timeout_seconds: float) -> RunResultView:
        self.require_session(session_id)
        handle = self.executor.get_handle(session_id)
        if handle is None:
            raise SessionNotFoundError(session_id)
        try:
            result = handle.result(timeout_seconds=timeout_seconds)
        except RunNotFinishedError as exc:  # a wait that ran out, not a model failure
            raise ResultTimeoutError(session_id, handle.run_id, timeout_seconds) from exc
        return RunResultView(
            session_id=session_id,
            run_id=handle.run_id,
            status=result.status,
            output=jsonable(result.output),
            error=result.error,
            suspended=result.suspended,
        )

    def interrupt(self, session_id: str, reason: str | None) -> InterruptAccepted:
        requested = self.executor.interrupt(session_id, reason)
        return InterruptAccepted(session_id=session_id, requested=requested)

    def abort(self, session_id: str, reason: str | None) -> AbortAccepted:
        self.executor.abort(session_id, reason)
        return AbortAccepted(session_id=session_id)

    def submit(self, session_id: str, submission: SubmitToolResult) -> ToolResultAccepted:
        # No waiting for an unknown call id: a run registers a call as pending before it streams the
        # call's tool_start (or shows it in a snapshot or the transcript), so a call id a client can
        # know is always registered, and an unknown one is refused at once, holding no thread.
        handle = self.executor.submit_tool_result(session_id, submission)
        return ToolResultAccepted(
            session_id=session_id,
            tool_call_id=submission.tool_call_id,
            run_id=handle.run_id if handle is not None else None,
        )

    def chat(self, body: ChatRequest) -> tuple[str, str]:
        agent = self.require_agent(body.agent)
        handle = self.executor.execute(agent, {"message": body.message}, session_id=body.session_id)
        return handle.session_id, handle.run_id

    def chat_start(self, session_id: str) -> tuple[str, int]:
        """The session's stream id and the current run's first stream position."""
        session = self.require_session(session_id)
        run = self.executor.store.get_current_run(session_id)
        return session.stream_id, run.stream_start_sequence if run is not None else 0

    # -- streams -------------------------------------------------------------------------------------
    async def open_stream(self, stream_id: str, after: int) -> Any:
        records = await self.executor.streams.records(stream_id, after_sequence=after)
        if records is None:
            raise HelixError(
                f"No stream {stream_id!r} is available on this server (yet)", code="transport_error", retryable=True
            )
        return records


def create_app(
    executor: DBOSAgentExecutor,
    *,
    authenticate: AuthenticateHook | None = None,
    bearer_tokens: Iterable[str] | None = None,
    allow_unauthenticated: bool = False,
    sse_ping_seconds: float = 15.0,
    sse_send_timeout_seconds: float | None = 30.0,
    max_result_wait_seconds: float = 300.0,
    max_body_bytes: int | None = 4 * 1024 * 1024,
    blocking_threads: int = 32,
    result_waiters: int = 64,
    title: str = "helix-dbos agent service",
) -> FastAPI:
    """Build the HTTP + SSE service over ``executor``.

    Raises :class:`~helix_dbos.service.auth.ServiceAuthConfigError` unless ``authenticate`` (sync or
    async ``(request) -> principal | None``), ``bearer_tokens`` or ``allow_unauthenticated=True`` is
    given: an agent service open to anyone by accident is the failure this guards against.

    The app does not own the executor: launch it before and shut it down after serving (the
    ``helix-dbos serve`` command does both).
    """
    authenticator = Authenticator(
        authenticate=authenticate, bearer_tokens=bearer_tokens, allow_unauthenticated=allow_unauthenticated
    )
    service = _Service(executor, blocking_threads=blocking_threads, result_waiters=result_waiters)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        service.close()

    app = FastAPI(
        title=title,
        description=API_DESCRIPTION,
        version="1",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.state.executor = executor
    app.state.authenticator = authenticator

    @app.get("/healthz", response_model=HealthView, tags=["health"])
    async def healthz() -> HealthView:
        """Liveness: the process serves HTTP (no authentication, no database round trip)."""
        return HealthView()

    # Documents the bearer scheme in OpenAPI; the check itself runs in the route class, first.
    dependencies = [Depends(HTTPBearer(auto_error=False))] if authenticator.uses_bearer_tokens else []
    api = APIRouter(
        prefix="/v1",
        route_class=_guarded_route_class(authenticator, max_body_bytes),
        dependencies=dependencies,
        responses=ERROR_RESPONSES,
    )

    def stream_url(request: Request, name: str, session_id: str) -> str:
        root_path: str = request.scope.get("root_path", "")
        return root_path + str(app.url_path_for(name, session_id=session_id))

    def accepted(request: Request, started: tuple[str, str, Any]) -> RunAccepted:
        session_id, run_id, status = started
        return RunAccepted(
            session_id=session_id,
            run_id=run_id,
            status=status,
            stream_url=stream_url(request, "session_stream", session_id),
        )

    async def sse(session_id: str, after: int | None, last_event_id: str | None, *, chat: bool) -> EventSourceResponse:
        try:
            position = parse_after(last_event_id, after)
        except ValueError:
            raise HelixError(
                "Last-Event-ID must be a stream sequence (a non-negative integer)", code="validation_error"
            ) from None
        stream_id, run_start = await service.call(service.chat_start, session_id)
        if position is None:
            position = run_start if chat else 0
        records = await service.open_stream(stream_id, position)
        return event_source(records, ping_seconds=sse_ping_seconds, send_timeout_seconds=sse_send_timeout_seconds)

    AfterQuery = Annotated[
        int | None,
        Query(ge=0, description="Resume after this stream sequence (the `Last-Event-ID` header wins)."),
    ]
    LastEventId = Annotated[
        str | None, Header(alias="Last-Event-ID", description="Sequence of the last chunk event received.")
    ]

    # -- runs and sessions ---------------------------------------------------------------------------------
    @api.post(
        "/runs",
        status_code=202,
        response_model=RunAccepted,
        tags=["runs"],
        description="Seeds' `POST /start`. Starts a run: a new session, or the next turn of a `completed` "
        "session given by `session_id`. An identical request while the run is in flight, or a repeat with the "
        "same `idempotency_key`, returns the same run.",
    )
    async def start_run(request: Request, body: StartRunRequest) -> RunAccepted:
        return accepted(request, await service.call(service.start, body))

    @api.get(
        "/sessions/{session_id}",
        response_model=SessionSnapshot,
        tags=["sessions"],
        description="Seeds' `GET /status`: session status, current run, pending tool calls, whether it can "
        "be resumed, and the stream's status (`active|paused|ended|failed`).",
    )
    async def get_session(session_id: SessionIdPath) -> SessionSnapshot:
        snapshot = await service.call(service.snapshot, session_id)
        info = await stream_info(executor.streams, session_id)
        if info is not None:
            snapshot.stream = StreamView(status=info.status, latest_sequence=info.latest_sequence)
        return snapshot

    @api.get(
        "/sessions/{session_id}/messages",
        response_model=PaginatedMessages,
        tags=["sessions"],
        description="A page of the session's transcript, in order.",
    )
    async def get_messages(
        session_id: SessionIdPath,
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> PaginatedMessages:
        return await service.call(service.messages, session_id, offset, limit)

    @api.get(
        "/sessions/{session_id}/runs",
        response_model=list[RunView],
        tags=["sessions"],
        description="Every run of the session, by turn.",
    )
    async def get_runs(session_id: SessionIdPath) -> list[RunView]:
        return await service.call(service.runs, session_id)

    @api.get(
        "/sessions/{session_id}/result",
        response_model=RunResultView,
        tags=["sessions"],
        description="The `AgentResult` of the session's current run, waiting up to `timeout_seconds` for it "
        "to finish; 408 (code `transport_error`, retryable) when it is still running then.",
        responses={408: ERROR_RESPONSES[500] | {"description": "The run did not finish in time."}},
    )
    async def get_result(
        session_id: SessionIdPath,
        timeout_seconds: Annotated[float, Query(ge=0, le=max_result_wait_seconds)] = 30.0,
    ) -> RunResultView:
        return await service.wait(service.result, session_id, timeout_seconds)

    @api.get(
        "/sessions/{session_id}/stream",
        tags=["streams"],
        name="session_stream",
        response_class=EventSourceResponse,
        description="Seeds' `GET /sse`: the session's stream as server-sent events, from the start or after "
        "the `Last-Event-ID` header (or `?after=`). Events: `chunk` (`id` = stream sequence, data = chunk "
        "JSON), `status`, `end`, `fail`, `truncated`; comment pings keep the connection open.",
    )
    async def session_stream(
        session_id: SessionIdPath, after: AfterQuery = None, last_event_id: LastEventId = None
    ) -> EventSourceResponse:
        return await sse(session_id, after, last_event_id, chat=False)

    @api.post(
        "/sessions/{session_id}/resume",
        status_code=202,
        response_model=RunAccepted,
        tags=["runs"],
        description="Seeds' `POST /resume`: continue an interrupted or suspended session in a new run.",
    )
    async def resume(request: Request, session_id: SessionIdPath, body: ResumeRequest | None = None) -> RunAccepted:
        return accepted(request, await service.call(service.resume, session_id, body or ResumeRequest()))

    @api.post(
        "/sessions/{session_id}/retry",
        status_code=202,
        response_model=RunAccepted,
        tags=["runs"],
        description="Start again from a checkpoint (the latest by default), discarding what followed it.",
    )
    async def retry(request: Request, session_id: SessionIdPath, body: RetryRequest | None = None) -> RunAccepted:
        return accepted(request, await service.call(service.retry, session_id, body or RetryRequest()))

    async def do_interrupt(session_id: str, body: InterruptRequest | None) -> InterruptAccepted:
        return await service.call(service.interrupt, session_id, body.reason if body else None)

    async def do_abort(session_id: str, body: AbortRequest | None) -> AbortAccepted:
        return await service.call(service.abort, session_id, body.reason if body else None)

    async def do_submit(session_id: str, submission: SubmitToolResult) -> ToolResultAccepted:
        return await service.call(service.submit, session_id, submission)

    interrupt_doc = (
        "Seeds' `POST /interrupt`: a durable flag the run reads at its next step, from any server process; "
        "the run stops as `interrupted` and stays resumable. `requested` is false when no run is in flight."
    )
    abort_doc = "Seeds' `POST /abort`: stop the run now; the session ends `failed` and is not resumable."
    submit_doc = (
        "Seeds' `POST /submit-tool-result`: answer a pending tool call, exactly once: "
        '`{"kind": "client-tool-result", "tool_call_id", "result" | "error"}` for a client-executed tool, '
        '`{"kind": "approval-response", "tool_call_id", "approved", "reason"?, "arguments_digest"?}` for an '
        "approval. A second answer is a 409 and changes nothing."
    )

    @api.post(
        "/sessions/{session_id}/interrupt",
        status_code=202,
        response_model=InterruptAccepted,
        tags=["runs"],
        description=interrupt_doc,
    )
    async def interrupt(session_id: SessionIdPath, body: InterruptRequest | None = None) -> InterruptAccepted:
        return await do_interrupt(session_id, body)

    @api.post("/sessions/{session_id}/abort", response_model=AbortAccepted, tags=["runs"], description=abort_doc)
    async def abort(session_id: SessionIdPath, body: AbortRequest | None = None) -> AbortAccepted:
        return await do_abort(session_id, body)

    @api.post(
        "/sessions/{session_id}/tool-results",
        status_code=202,
        response_model=ToolResultAccepted,
        tags=["runs"],
        description=submit_doc,
    )
    async def submit_tool_result(
        session_id: SessionIdPath, submission: Annotated[SubmitToolResult, Body()]
    ) -> ToolResultAccepted:
        return await do_submit(session_id, submission)

    # -- chat -------------------------------------------------------------------------------------------
    @api.post(
        "/chat",
        status_code=202,
        response_model=ChatAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat`: a new session, or the next turn of a completed one.",
    )
    async def chat(request: Request, body: ChatRequest) -> ChatAccepted:
        session_id, run_id = await service.call(service.chat, body)
        return ChatAccepted(
            session_id=session_id, run_id=run_id, stream_url=stream_url(request, "chat_stream", session_id)
        )

    @api.get(
        "/chat/{session_id}/stream",
        tags=["chat"],
        name="chat_stream",
        response_class=EventSourceResponse,
        description="Chat handler `GET /chat/{sessionId}/stream`: the session's stream from the current run's "
        "first chunk (or after `Last-Event-ID`), as server-sent events (see the session stream).",
    )
    async def chat_stream(
        session_id: SessionIdPath, after: AfterQuery = None, last_event_id: LastEventId = None
    ) -> EventSourceResponse:
        return await sse(session_id, after, last_event_id, chat=True)

    @api.post(
        "/chat/{session_id}/tool-results",
        status_code=202,
        response_model=ToolResultAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat/{sessionId}/submit-tool-result`. " + submit_doc,
    )
    async def chat_submit(
        session_id: SessionIdPath, submission: Annotated[SubmitToolResult, Body()]
    ) -> ToolResultAccepted:
        return await do_submit(session_id, submission)

    @api.post(
        "/chat/{session_id}/interrupt",
        status_code=202,
        response_model=InterruptAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat/{sessionId}/interrupt`. " + interrupt_doc,
    )
    async def chat_interrupt(session_id: SessionIdPath, body: InterruptRequest | None = None) -> InterruptAccepted:
        return await do_interrupt(session_id, body)

    @api.post(
        "/chat/{session_id}/abort",
        response_model=AbortAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat/{sessionId}/abort`. " + abort_doc,
    )
    async def chat_abort(session_id: SessionIdPath, body: AbortRequest | None = None) -> AbortAccepted:
        return await do_abort(session_id, body)

    app.include_router(api)
    return app


__all__ = ["create_app"]
