"""Forking a session over HTTP: ``POST /v1/sessions/{id}/fork`` (``executor.fork``).

The rules are the executor's (:mod:`helix_dbos.runtime.forks`); this module maps its refusals to
statuses: an unknown session or checkpoint is a 404 (``state_session_not_found``,
``state_checkpoint_not_found``), a session with a run in flight and no checkpoint named a 409
(``state_already_running``), a ``new_session_id`` taken by another session a 409 (``state_conflict``).
"""

from fastapi.routing import APIRouter

from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import NOT_FOUND, RouteContext, SessionIdPath
from helix_dbos.service.schemas import ForkRequest, ForkView

__all__ = ["forks_router"]


def forks_router(ctx: RouteContext) -> APIRouter:
    """Branch a new session from a checkpoint of an existing one."""
    router = ctx.router()
    service = ctx.service

    @router.post(
        "/sessions/{session_id}/fork",
        response_model=ForkView,
        tags=["sessions"],
        description="Branch a new session from a checkpoint of this one (the latest by default): its own copy "
        "of the transcript up to the checkpoint, the custom state as of it, its own stream, no runs. The fork "
        "is idle (`completed`, or `failed` when the checkpoint recorded a failure): continue it with `POST "
        "/v1/runs` and its `session_id`, or replay the step after the checkpoint with `.../retry`. The original "
        "is not changed. With `new_session_id`, a repeat answers with the same fork (`created` false).",
        responses=error_responses(
            NOT_FOUND, "state_checkpoint_not_found", "state_already_running", "state_conflict", body=True
        ),
    )
    async def fork(session_id: SessionIdPath, body: ForkRequest | None = None) -> ForkView:
        return await service.call(service.fork, session_id, body or ForkRequest())

    return router
