"""The session stream over SSE: ``GET /v1/sessions/{id}/stream``, resumable with ``Last-Event-ID``."""

from fastapi.routing import APIRouter
from sse_starlette import EventSourceResponse
from starlette.responses import Response

from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import NOT_FOUND, AfterQuery, LastEventId, RouteContext, SessionIdPath

__all__ = ["streams_router"]


def streams_router(ctx: RouteContext) -> APIRouter:
    """The session stream; its route name, ``session_stream``, is what run answers link to."""
    router = ctx.router()

    @router.get(
        "/sessions/{session_id}/stream",
        tags=["streams"],
        name="session_stream",
        response_class=EventSourceResponse,
        description="Seeds' `GET /sse`: the session's stream as server-sent events, from the start or after "
        "the `Last-Event-ID` header (or `?after=`). Events: `chunk` (`id` = stream sequence, data = chunk "
        "JSON), `status`, `end`, `fail`, `truncated`; comment pings keep the connection open.",
        responses=error_responses(NOT_FOUND),
    )
    async def session_stream(
        session_id: SessionIdPath, after: AfterQuery = None, last_event_id: LastEventId = None
    ) -> Response:
        return await ctx.sse(session_id, after, last_event_id, chat=False)

    return router
