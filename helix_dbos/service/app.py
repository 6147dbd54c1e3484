"""The durable agent service: ``create_app(executor, ...)`` -> a FastAPI app (HTTP + SSE).

The routes, one router per area, are in :mod:`helix_dbos.service.routes` (with the table of
the seeds' ``AgentServer`` operations they implement); this module assembles them.

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

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping

from fastapi import Depends, FastAPI
from fastapi.security import HTTPBearer

from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service.auth import AuthenticateHook, Authenticator
from helix_dbos.service.errors import install_error_handlers
from helix_dbos.service.guard import guarded_route_class
from helix_dbos.service.openapi import install_openapi
from helix_dbos.service.operations import ServiceOperations
from helix_dbos.service.routes import (
    RouteContext,
    agui_router,
    chat_router,
    control_router,
    forks_router,
    health_router,
    hitl_router,
    inspector_router,
    queue_router,
    schedules_router,
    sessions_router,
    streams_router,
    ui_chat_router,
)
from helix_dbos.service.ui import ui_router

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
| `POST /v1/chat/ui`, `GET /v1/chat/ui/{id}/stream` | AI SDK `useChat` (UI message stream) and its reconnect |
| `POST /v1/agui`, `GET /v1/agui/threads/{id}/stream` | (new) AG-UI `HttpAgent` (AG-UI events) and its re-attach |
| `GET /v1/queue` | (new) run queue depth and per-worker load, when runs are queued |
| `GET /v1/agents` | (new) the served agents |
| `GET /v1/sessions`, `/v1/sessions/{id}/timeline`, `/state` | (new) sessions list, step timeline, custom state |

The web inspector (`GET /ui`) is a page over these routes; it asks for the same credentials.

Every route but `/healthz`, these docs and the inspector's static files needs credentials (a 401
otherwise, and nothing changes). A caller sees its own tenant's sessions only: another tenant's
session answers 404 `state_session_not_found`, exactly like an unknown id.
Errors are `{"error": {"code", "message", "retryable"}}` with the seeds' error codes; each code has
one HTTP status, and each route's responses list the codes it answers. Text fields reject NUL
(`\u0000`) and lone surrogates with a 422 `validation_invalid_text`.
"""


def create_app(
    executor: DBOSAgentExecutor,
    *,
    authenticate: AuthenticateHook | None = None,
    bearer_tokens: Iterable[str] | Mapping[str, str] | None = None,
    allow_unauthenticated: bool = False,
    sse_ping_seconds: float = 15.0,
    sse_send_timeout_seconds: float | None = 30.0,
    max_result_wait_seconds: float = 300.0,
    max_body_bytes: int | None = 4 * 1024 * 1024,
    blocking_threads: int = 32,
    result_waiters: int = 64,
    title: str = "helix-dbos agent service",
    a2a: bool = False,
) -> FastAPI:
    """Build the HTTP + SSE service over ``executor``.

    Raises :class:`~helix_dbos.service.auth.ServiceAuthConfigError` unless ``authenticate`` (sync or
    async ``(request) -> principal | None``), ``bearer_tokens`` or ``allow_unauthenticated=True`` is
    given: an agent service open to anyone by accident is the failure this guards against.

    ``bearer_tokens`` as a mapping ``{token: tenant}`` puts each token's caller in its tenant
    (:mod:`helix_dbos.tenancy`; an ``authenticate`` hook's principal names its own with a
    ``tenant`` attribute or key): a tenant sees, lists and controls its own sessions only, and
    another tenant's session is a 404 ``state_session_not_found`` on every route.

    ``a2a=True`` also serves every agent over the A2A protocol at ``/a2a/{agent}`` (its card at
    ``/a2a/{agent}/.well-known/agent-card.json``; see :mod:`helix_dbos.a2a`); it needs the ``[a2a]``
    extra, and raises ``ModuleNotFoundError`` naming it before anything is built when it is missing.

    The app does not own the executor: launch it before and shut it down after serving (the
    ``helix-dbos serve`` command does both).
    """
    if a2a:
        from helix_dbos.a2a.sdk import require_a2a_sdk

        require_a2a_sdk()
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

    def session_tenant(session_id: str) -> str | None:
        session = executor.reads.get_session(session_id)
        return session.tenant if session is not None else None

    async def tenant_of_session(session_id: str) -> str | None:
        return await service.call(session_tenant, session_id)

    app.state.executor = executor
    app.state.authenticator = authenticator

    app.include_router(health_router())
    app.include_router(ui_router())
    # Documents the bearer scheme in OpenAPI; the check itself runs in the route class, first.
    dependencies = [Depends(HTTPBearer(auto_error=False))] if authenticator.uses_bearer_tokens else []
    context = RouteContext(
        executor=executor,
        service=service,
        route_class=guarded_route_class(authenticator, max_body_bytes, tenant_of_session),
        dependencies=dependencies,
        sse_ping_seconds=sse_ping_seconds,
        sse_send_timeout_seconds=sse_send_timeout_seconds,
        max_result_wait_seconds=max_result_wait_seconds,
    )
    for router in (
        sessions_router,
        streams_router,
        control_router,
        forks_router,
        hitl_router,
        ui_chat_router,
        agui_router,
        chat_router,
        queue_router,
        schedules_router,
        inspector_router,
    ):
        app.include_router(router(context))
    if a2a:
        from helix_dbos.a2a.routes import a2a_router

        app.include_router(a2a_router(context, bearer=authenticator.uses_bearer_tokens))
    install_openapi(app, agent_names=lambda: executor.registry.names())
    return app


__all__ = ["create_app"]
