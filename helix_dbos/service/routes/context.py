"""What every router of the service shares: its dependencies, path and query types, error sets, helpers.

A :class:`RouteContext` is built once per app by :func:`~helix_dbos.service.app.create_app` and
handed to each area's router factory, so routers hold no module state and two apps in one process
(two executors, two settings) never share anything.
"""

# No ``from __future__ import annotations``: FastAPI reads route signatures at runtime.
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Header, Path, Query, Request
from fastapi.params import Depends
from fastapi.routing import APIRoute, APIRouter
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.responses import Response

from helix_dbos.double_text import DoubleTextReceipt
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service.auth import principal_scope
from helix_dbos.service.operations import ServiceOperations
from helix_dbos.service.schemas import (
    AbortAccepted,
    AbortRequest,
    InterruptAccepted,
    InterruptRequest,
    RunAccepted,
    ToolResultAccepted,
)
from helix_dbos.service.sse import LAST_EVENT_ID_PATTERN, parse_after
from helix_dbos.session import SubmitToolResult
from helix_dbos.stream.resumable import ResumableStreamHandler
from helix_dbos.tenancy import DEFAULT_TENANT

__all__ = [
    "ABORT_DOC",
    "CONFLICTS",
    "INTERRUPT_DOC",
    "MAX_SEQUENCE",
    "MISMATCH",
    "NOT_FOUND",
    "REFUSED_IN_STREAM",
    "SUBMIT_DOC",
    "TENANT_BUDGET",
    "AfterQuery",
    "LastEventId",
    "RouteContext",
    "SessionIdPath",
    "caller_scope",
    "caller_tenant",
    "stream_url",
]

SessionIdPath = Annotated[str, Path(description="The session id.")]

MAX_SEQUENCE = 999_999_999_999_999_999
"""The largest stream sequence or offset a request may name (18 digits, inside PostgreSQL's bigint)."""

AfterQuery = Annotated[
    int | None,
    Query(ge=0, le=MAX_SEQUENCE, description="Resume after this stream sequence (the `Last-Event-ID` header wins)."),
]
LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        pattern=LAST_EVENT_ID_PATTERN,
        description="The `id` of the last chunk event received: a stream sequence (digits).",
    ),
]

# Each route's error responses: the codes it can answer beyond the common ones (credentials,
# validation, a bug, the database away), grouped by their one HTTP status (``error_responses``).
NOT_FOUND = "state_session_not_found"
CONFLICTS = ("state_already_running", "state_not_resumable", "state_concurrency_conflict")
MISMATCH = ("state_agent_mismatch", "state_conflict")
"""The session belongs to another agent."""
TENANT_BUDGET = "tenant_budget_exceeded"
"""A route that starts a run: the caller's tenant may have spent its budget."""

INTERRUPT_DOC = (
    "Seeds' `POST /interrupt`: a durable flag the run reads at its next step, from any server process; "
    "the run stops as `interrupted` and stays resumable. `requested` is false when no run is in flight."
)
ABORT_DOC = "Seeds' `POST /abort`: stop the run now; the session ends `failed` and is not resumable."
SUBMIT_DOC = (
    "Seeds' `POST /submit-tool-result`: answer a pending tool call, exactly once: "
    '`{"kind": "client-tool-result", "tool_call_id", "result" | "error"}` for a client-executed tool, '
    '`{"kind": "approval-response", "tool_call_id", "approved", "reason"?, "arguments_digest"?}` for an '
    "approval. A second answer is a 409 and changes nothing."
)


REFUSED_IN_STREAM = ("validation_error", "validation_invalid_text")
"""Refusals of a schema-valid chat post that the chat protocols answer in their stream, not as a 422.

The clients (``useChat``, AG-UI's ``HttpAgent``) show an error inside the stream as the run's
failure, but a 4xx as a transport error; a post the schema allows but the service cannot act on (no
text, no agent named when several are served, NUL in the text) is the former.
"""


def caller_scope(request: Request) -> str:
    """The caller's scope (:func:`~helix_dbos.service.auth.principal_scope`), for keys the caller chooses."""
    return principal_scope(getattr(request.state, "principal", None))


def caller_tenant(request: Request) -> str:
    """The caller's tenant, set by the route class's authentication (the default one before it ran)."""
    tenant = getattr(request.state, "tenant", None)
    return tenant if isinstance(tenant, str) else DEFAULT_TENANT


def stream_url(request: Request, name: str, session_id: str) -> str:
    """The path of the stream route ``name`` for ``session_id``, under the app's mount point."""
    root_path: str = request.scope.get("root_path", "")
    return root_path + str(request.app.url_path_for(name, session_id=session_id))


@dataclass(frozen=True)
class RouteContext:
    """One app's executor, operations and settings, as its routers need them."""

    executor: DBOSAgentExecutor
    service: ServiceOperations
    route_class: type[APIRoute]
    """Runs authentication and the body-size guard before FastAPI parses a request."""
    dependencies: list[Depends]
    """Documents the bearer scheme in OpenAPI (the check itself is in ``route_class``)."""
    sse_ping_seconds: float
    sse_send_timeout_seconds: float | None
    max_result_wait_seconds: float

    def router(self) -> APIRouter:
        """A fresh ``/v1`` router with the app's guarded route class."""
        return APIRouter(prefix="/v1", route_class=self.route_class, dependencies=self.dependencies)

    def accepted(
        self, request: Request, started: tuple[str, str, Any], double_text: DoubleTextReceipt | None = None
    ) -> RunAccepted:
        """The 202 answer to a started run, pointing at its session stream."""
        session_id, run_id, status = started
        return RunAccepted(
            session_id=session_id,
            run_id=run_id,
            status=status,
            stream_url=stream_url(request, "session_stream", session_id),
            double_text=double_text,
        )

    async def sse(self, session_id: str, after: int | None, last_event_id: str | None, *, chat: bool) -> Response:
        """The session's stream as server-sent events, from ``Last-Event-ID`` / ``after`` or the start.

        Without a position the session stream starts at its beginning, the chat stream at the
        current run's first chunk.
        """
        position = parse_after(last_event_id, after)
        stream_id, run_start = await self.service.call(self.service.chat_start, session_id)
        if position is None:
            position = run_start if chat else 0
        return await self.stream_handler().handle(stream_id, position)

    def event_stream(self, events: AsyncIterator[ServerSentEvent], headers: Mapping[str, str]) -> EventSourceResponse:
        """A chat protocol's SSE response, with the app's ping and send timeout.

        Newline line ends: what the protocols' own servers send, and what their clients split on.
        """
        return EventSourceResponse(
            events,
            ping=self.sse_ping_seconds,
            send_timeout=self.sse_send_timeout_seconds,
            headers=headers,
            sep="\n",
        )

    def stream_handler(self) -> ResumableStreamHandler:
        """The toolkit's resumable SSE handler over this app's streams (opened on the runtime's loop)."""
        return ResumableStreamHandler(
            open_records=self.service.open_stream,
            ping_seconds=self.sse_ping_seconds,
            send_timeout_seconds=self.sse_send_timeout_seconds,
        )

    async def interrupt(self, session_id: str, body: InterruptRequest | None) -> InterruptAccepted:
        """Request an interrupt (session and chat routes alike)."""
        return await self.service.call(self.service.interrupt, session_id, body.reason if body else None)

    async def abort(self, session_id: str, body: AbortRequest | None) -> AbortAccepted:
        """Abort the current run (session and chat routes alike)."""
        return await self.service.call(self.service.abort, session_id, body.reason if body else None)

    async def submit(self, session_id: str, submission: SubmitToolResult) -> ToolResultAccepted:
        """Answer a pending tool call (session and chat routes alike)."""
        return await self.service.submit(session_id, submission)
