"""Run control: resume, retry, interrupt and abort a session's run (``POST /v1/sessions/{id}/...``)."""

from fastapi import Request
from fastapi.routing import APIRouter

from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import (
    ABORT_DOC,
    CONFLICTS,
    INTERRUPT_DOC,
    MISMATCH,
    NOT_FOUND,
    TENANT_BUDGET,
    RouteContext,
    SessionIdPath,
)
from helix_dbos.service.schemas import (
    AbortAccepted,
    AbortRequest,
    InterruptAccepted,
    InterruptRequest,
    ResumeRequest,
    RetryRequest,
    RunAccepted,
)

__all__ = ["control_router"]


def control_router(ctx: RouteContext) -> APIRouter:
    """Start a new run of an existing session (resume, retry) or stop the current one."""
    router = ctx.router()
    service = ctx.service
    control_errors = error_responses(NOT_FOUND, *CONFLICTS, body=True)

    @router.post(
        "/sessions/{session_id}/resume",
        status_code=202,
        response_model=RunAccepted,
        tags=["runs"],
        description="Seeds' `POST /resume`: continue an interrupted or suspended session in a new run.",
        responses=error_responses(NOT_FOUND, "state_agent_not_found", *CONFLICTS, *MISMATCH, TENANT_BUDGET, body=True),
    )
    async def resume(request: Request, session_id: SessionIdPath, body: ResumeRequest | None = None) -> RunAccepted:
        return ctx.accepted(request, await service.call(service.resume, session_id, body or ResumeRequest()))

    @router.post(
        "/sessions/{session_id}/retry",
        status_code=202,
        response_model=RunAccepted,
        tags=["runs"],
        description="Start again from a checkpoint (the latest by default), discarding what followed it.",
        responses=error_responses(
            NOT_FOUND,
            "state_agent_not_found",
            "state_checkpoint_not_found",
            *CONFLICTS,
            *MISMATCH,
            TENANT_BUDGET,
            body=True,
        ),
    )
    async def retry(request: Request, session_id: SessionIdPath, body: RetryRequest | None = None) -> RunAccepted:
        return ctx.accepted(request, await service.call(service.retry, session_id, body or RetryRequest()))

    @router.post(
        "/sessions/{session_id}/interrupt",
        status_code=202,
        response_model=InterruptAccepted,
        tags=["runs"],
        description=INTERRUPT_DOC,
        responses=control_errors,
    )
    async def interrupt(session_id: SessionIdPath, body: InterruptRequest | None = None) -> InterruptAccepted:
        return await ctx.interrupt(session_id, body)

    @router.post(
        "/sessions/{session_id}/abort",
        response_model=AbortAccepted,
        tags=["runs"],
        description=ABORT_DOC,
        responses=control_errors,
    )
    async def abort(session_id: SessionIdPath, body: AbortRequest | None = None) -> AbortAccepted:
        return await ctx.abort(session_id, body)

    return router
