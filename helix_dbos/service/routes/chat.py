"""The seeds' chat handler (``/v1/chat...``): start, stream, submit, interrupt and abort by session id.

A facade over the other areas with the chat handler's shapes: its stream starts at the current
run's first chunk rather than the session's first, and its start answers a ``ChatAccepted``.
"""

from typing import Annotated

from fastapi import Body, Request
from fastapi.routing import APIRouter
from sse_starlette import EventSourceResponse
from starlette.responses import Response

from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import (
    ABORT_DOC,
    CONFLICTS,
    INTERRUPT_DOC,
    MISMATCH,
    NOT_FOUND,
    SUBMIT_DOC,
    TENANT_BUDGET,
    AfterQuery,
    LastEventId,
    RouteContext,
    SessionIdPath,
    caller_tenant,
    stream_url,
)
from helix_dbos.service.routes.hitl import SUBMIT_ERROR_CODES
from helix_dbos.service.schemas import (
    AbortAccepted,
    AbortRequest,
    ChatAccepted,
    ChatRequest,
    InterruptAccepted,
    InterruptRequest,
    ToolResultAccepted,
)
from helix_dbos.session import SubmitToolResult

__all__ = ["chat_router"]


def chat_router(ctx: RouteContext) -> APIRouter:
    """The chat handler's five routes."""
    router = ctx.router()
    service = ctx.service
    control_errors = error_responses(NOT_FOUND, *CONFLICTS, body=True)

    @router.post(
        "/chat",
        status_code=202,
        response_model=ChatAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat`: a new session, or the next turn of a completed one. A message "
        "posted while the session's run is in flight follows `double_text` (`docs/double-texting.md`).",
        responses=error_responses("state_agent_not_found", *CONFLICTS, *MISMATCH, TENANT_BUDGET, body=True),
    )
    async def chat(request: Request, body: ChatRequest) -> ChatAccepted:
        session_id, run_id, receipt = await service.call(service.chat, body, caller_tenant(request))
        return ChatAccepted(
            session_id=session_id,
            run_id=run_id,
            stream_url=stream_url(request, "chat_stream", session_id),
            double_text=receipt,
        )

    @router.get(
        "/chat/{session_id}/stream",
        tags=["chat"],
        name="chat_stream",
        response_class=EventSourceResponse,
        description="Chat handler `GET /chat/{sessionId}/stream`: the session's stream from the current run's "
        "first chunk (or after `Last-Event-ID`), as server-sent events (see the session stream).",
        responses=error_responses(NOT_FOUND),
    )
    async def chat_stream(
        session_id: SessionIdPath, after: AfterQuery = None, last_event_id: LastEventId = None
    ) -> Response:
        return await ctx.sse(session_id, after, last_event_id, chat=True)

    @router.post(
        "/chat/{session_id}/tool-results",
        status_code=202,
        response_model=ToolResultAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat/{sessionId}/submit-tool-result`. " + SUBMIT_DOC,
        responses=error_responses(*SUBMIT_ERROR_CODES, body=True),
    )
    async def chat_submit(
        session_id: SessionIdPath, submission: Annotated[SubmitToolResult, Body()]
    ) -> ToolResultAccepted:
        return await ctx.submit(session_id, submission)

    @router.post(
        "/chat/{session_id}/interrupt",
        status_code=202,
        response_model=InterruptAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat/{sessionId}/interrupt`. " + INTERRUPT_DOC,
        responses=control_errors,
    )
    async def chat_interrupt(session_id: SessionIdPath, body: InterruptRequest | None = None) -> InterruptAccepted:
        return await ctx.interrupt(session_id, body)

    @router.post(
        "/chat/{session_id}/abort",
        response_model=AbortAccepted,
        tags=["chat"],
        description="Chat handler `POST /chat/{sessionId}/abort`. " + ABORT_DOC,
        responses=control_errors,
    )
    async def chat_abort(session_id: SessionIdPath, body: AbortRequest | None = None) -> AbortAccepted:
        return await ctx.abort(session_id, body)

    return router
