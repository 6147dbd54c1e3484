"""HITL submissions: ``POST /v1/sessions/{id}/tool-results`` answers a pending tool call, once."""

from typing import Annotated

from fastapi import Body
from fastapi.routing import APIRouter

from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import CONFLICTS, NOT_FOUND, SUBMIT_DOC, RouteContext, SessionIdPath
from helix_dbos.service.schemas import ToolResultAccepted
from helix_dbos.session import SubmitToolResult

__all__ = ["SUBMIT_ERROR_CODES", "hitl_router"]

SUBMIT_ERROR_CODES = (NOT_FOUND, "state_tool_call_not_found", *CONFLICTS, "state_conflict")
"""What a submission can answer beyond the common codes (the chat route answers the same)."""


def hitl_router(ctx: RouteContext) -> APIRouter:
    """Client-tool results and approval responses for a session's pending calls."""
    router = ctx.router()

    @router.post(
        "/sessions/{session_id}/tool-results",
        status_code=202,
        response_model=ToolResultAccepted,
        tags=["runs"],
        description=SUBMIT_DOC,
        responses=error_responses(*SUBMIT_ERROR_CODES, body=True),
    )
    async def submit_tool_result(
        session_id: SessionIdPath, submission: Annotated[SubmitToolResult, Body()]
    ) -> ToolResultAccepted:
        return await ctx.submit(session_id, submission)

    return router
