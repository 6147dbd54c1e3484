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
import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Header, Path, Query, Request
from fastapi.routing import APIRouter
from fastapi.security import HTTPBearer
from sse_starlette import EventSourceResponse

from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service.auth import AuthenticateHook, Authenticator, principal_scope
from helix_dbos.service.errors import error_responses, install_error_handlers
from helix_dbos.service.guard import guarded_route_class
from helix_dbos.service.openapi import install_openapi
from helix_dbos.service.operations import ServiceOperations
from helix_dbos.service.schemas import (
    AbortAccepted,
    AbortRequest,
    ChatAccepted,
    ChatRequest,
    HealthView,
    InterruptAccepted,
    InterruptRequest,
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
from helix_dbos.service.sse import LAST_EVENT_ID_PATTERN, event_source, parse_after, stream_info
from helix_dbos.session import SubmitToolResult
from helix_dbos.store.base import PaginatedMessages

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
Errors are `{"error": {"code", "message", "retryable"}}` with the seeds' error codes; each code has
one HTTP status, and each route's responses list the codes it answers. Text fields reject NUL
(`\u0000`) and lone surrogates with a 422 `validation_invalid_text`.
"""

SessionIdPath = Annotated[str, Path(description="The session id.")]

MAX_SEQUENCE = 999_999_999_999_999_999
"""The largest stream sequence or offset a request may name (18 digits, inside PostgreSQL's bigint)."""


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
    service = ServiceOperations(
        executor,
        blocking_threads=blocking_threads,
        result_waiters=result_waiters,
    )

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
        prefix="/v1", route_class=guarded_route_class(authenticator, max_body_bytes), dependencies=dependencies
    )

    # Each route's error responses: the codes it can answer beyond the common ones (credentials,
    # validation, a bug, the database away), grouped by their one HTTP status.
    not_found = "state_session_not_found"
    conflicts = ("state_already_running", "state_not_resumable", "state_concurrency_conflict")
    mismatch = ("state_agent_mismatch", "state_conflict")  # the session belongs to another agent
    read_errors = error_responses(not_found)
    start_errors = error_responses("state_agent_not_found", *conflicts, *mismatch, body=True)
    resume_errors = error_responses(not_found, "state_agent_not_found", *conflicts, *mismatch, body=True)
    retry_errors = error_responses(
        not_found, "state_agent_not_found", "state_checkpoint_not_found", *conflicts, *mismatch, body=True
    )
    control_errors = error_responses(not_found, *conflicts, body=True)
    submit_errors = error_responses(not_found, "state_tool_call_not_found", *conflicts, "state_conflict", body=True)
    result_errors = error_responses(not_found, "transport_result_timeout")

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
        position = parse_after(last_event_id, after)
        stream_id, run_start = await service.call(service.chat_start, session_id)
        if position is None:
            position = run_start if chat else 0
        records = await service.open_stream(stream_id, position)
        return event_source(records, ping_seconds=sse_ping_seconds, send_timeout_seconds=sse_send_timeout_seconds)

    AfterQuery = Annotated[
        int | None,
        Query(
            ge=0, le=MAX_SEQUENCE, description="Resume after this stream sequence (the `Last-Event-ID` header wins)."
        ),
    ]
    LastEventId = Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            pattern=LAST_EVENT_ID_PATTERN,
            description="The `id` of the last chunk event received: a stream sequence (digits).",
        ),
    ]

    # -- runs and sessions ---------------------------------------------------------------------------------
    @api.post(
        "/runs",
        status_code=202,
        response_model=RunAccepted,
        tags=["runs"],
        description="Seeds' `POST /start`. Starts a run: a new session, or the next turn of a `completed` "
        "session given by `session_id`. An identical request while the run is in flight, or a repeat with the "
        "same `idempotency_key` (without `session_id`: for the same caller), returns the same run.",
        responses=start_errors,
    )
    async def start_run(request: Request, body: StartRunRequest) -> RunAccepted:
        scope = principal_scope(getattr(request.state, "principal", None))
        return accepted(request, await service.call(service.start, body, scope))

    @api.get(
        "/sessions/{session_id}",
        response_model=SessionSnapshot,
        tags=["sessions"],
        description="Seeds' `GET /status`: session status, current run, pending tool calls, whether it can "
        "be resumed, and the stream's status (`active|paused|ended|failed`).",
        responses=read_errors,
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
        responses=read_errors,
    )
    async def get_messages(
        session_id: SessionIdPath,
        offset: Annotated[int, Query(ge=0, le=MAX_SEQUENCE)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> PaginatedMessages:
        return await service.call(service.messages, session_id, offset, limit)

    @api.get(
        "/sessions/{session_id}/runs",
        response_model=list[RunView],
        tags=["sessions"],
        description="Every run of the session, by turn.",
        responses=read_errors,
    )
    async def get_runs(session_id: SessionIdPath) -> list[RunView]:
        return await service.call(service.runs, session_id)

    @api.get(
        "/sessions/{session_id}/result",
        response_model=RunResultView,
        tags=["sessions"],
        description="The `AgentResult` of the session's current run, waiting up to `timeout_seconds` for it "
        "to finish; 408 (code `transport_result_timeout`, retryable) when it is still running then. An aborted "
        "run answers at once: `status` `failed`, `aborted` true, with the `abort_reason`.",
        responses=result_errors,
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
        responses=read_errors,
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
        responses=resume_errors,
    )
    async def resume(request: Request, session_id: SessionIdPath, body: ResumeRequest | None = None) -> RunAccepted:
        return accepted(request, await service.call(service.resume, session_id, body or ResumeRequest()))

    @api.post(
        "/sessions/{session_id}/retry",
        status_code=202,
        response_model=RunAccepted,
        tags=["runs"],
        description="Start again from a checkpoint (the latest by default), discarding what followed it.",
        responses=retry_errors,
    )
    async def retry(request: Request, session_id: SessionIdPath, body: RetryRequest | None = None) -> RunAccepted:
        return accepted(request, await service.call(service.retry, session_id, body or RetryRequest()))

    async def do_interrupt(session_id: str, body: InterruptRequest | None) -> InterruptAccepted:
        return await service.call(service.interrupt, session_id, body.reason if body else None)

    async def do_abort(session_id: str, body: AbortRequest | None) -> AbortAccepted:
        return await service.call(service.abort, session_id, body.reason if body else None)

    async def do_submit(session_id: str, submission: SubmitToolResult) -> ToolResultAccepted:
        return await service.submit(session_id, submission)

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
        responses=control_errors,
    )
    async def interrupt(session_id: SessionIdPath, body: InterruptRequest | None = None) -> InterruptAccepted:
        return await do_interrupt(session_id, body)

    @api.post(
        "/sessions/{session_id}/abort",
        response_model=AbortAccepted,
        tags=["runs"],
        description=abort_doc,
        responses=control_errors,
    )
    async def abort(session_id: SessionIdPath, body: AbortRequest | None = None) -> AbortAccepted:
        return await do_abort(session_id, body)

    @api.post(
        "/sessions/{session_id}/tool-results",
        status_code=202,
        response_model=ToolResultAccepted,
        tags=["runs"],
        description=submit_doc,
        responses=submit_errors,
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
        responses=start_errors,
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
        responses=read_errors,
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
        responses=submit_errors,
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
        responses=control_errors,
    )
    async def chat_interrupt(session_id: SessionIdPath, body: InterruptRequest | None = None) -> InterruptAccepted:
        return await do_interrupt(session_id, body)

    @api.post(
        "/chat/{session_id}/abort",
        response_model=AbortAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat/{sessionId}/abort`. " + abort_doc,
        responses=control_errors,
    )
    async def chat_abort(session_id: SessionIdPath, body: AbortRequest | None = None) -> AbortAccepted:
        return await do_abort(session_id, body)

    app.include_router(api)
    install_openapi(app, agent_names=lambda: executor.registry.names())
    return app


__all__ = ["create_app"]
