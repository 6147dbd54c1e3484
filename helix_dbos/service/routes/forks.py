"""Time travel over HTTP: ``POST /v1/sessions/{id}/fork`` (``executor.fork``) and the state history it picks from.

``GET /v1/sessions/{id}/checkpoints`` lists a session's checkpoints (newest first: step, run,
message count, a state summary, time); ``POST .../fork`` branches a new session from one, with an
edited input or custom state when asked. The rules are the executor's
(:mod:`helix_dbos.runtime.forks`); this module maps its refusals to statuses: an unknown session or
checkpoint is a 404 (``state_session_not_found``, ``state_checkpoint_not_found``), a session with a
run in flight and no checkpoint named a 409 (``state_already_running``), a ``new_session_id`` taken
by another session (or by this fork with other edits) a 409 (``state_conflict``), edits that
contradict each other or the checkpoint a 422 (``validation_error``).
"""

from typing import Annotated

from fastapi import Query
from fastapi.routing import APIRouter

from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import MAX_SEQUENCE, NOT_FOUND, RouteContext, SessionIdPath
from helix_dbos.service.schemas import ForkRequest, ForkView
from helix_dbos.store.base import PaginatedCheckpoints

__all__ = ["forks_router"]


def forks_router(ctx: RouteContext) -> APIRouter:
    """Branch a new session from a checkpoint of an existing one; list the checkpoints to branch from."""
    router = ctx.router()
    service = ctx.service

    @router.get(
        "/sessions/{session_id}/checkpoints",
        response_model=PaginatedCheckpoints,
        tags=["sessions"],
        description="The session's state history, newest first: each checkpoint's id (what `fork` and `retry` "
        "take), step, run, message count, custom state summary and time.",
        responses=error_responses(NOT_FOUND),
    )
    async def list_checkpoints(
        session_id: SessionIdPath,
        offset: Annotated[int, Query(ge=0, le=MAX_SEQUENCE)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> PaginatedCheckpoints:
        return await service.call(service.checkpoints, session_id, offset, limit)

    @router.post(
        "/sessions/{session_id}/fork",
        response_model=ForkView,
        tags=["sessions"],
        description="Branch a new session from a checkpoint of this one (the latest by default): its own copy "
        "of the transcript up to the checkpoint, the custom state as of it, its own stream, no runs. Any session "
        "forks, a sub-agent's or companion's too; the fork is standalone. Time travel: `message` replaces the "
        "checkpoint's last user message (`message_mode` `replace`) or is added (`append`); `state` replaces the "
        "custom state, `state_patch` merges into it (RFC 7396). The fork is idle (`completed`, or `failed` when "
        "the checkpoint recorded a failure): `.../retry` on it runs the model on the edited input, `POST "
        "/v1/runs` with its `session_id` continues it with a new message. The original is not changed. With "
        "`new_session_id`, a repeat answers with the same fork (`created` false).",
        responses=error_responses(
            NOT_FOUND, "state_checkpoint_not_found", "state_already_running", "state_conflict", body=True
        ),
    )
    async def fork(session_id: SessionIdPath, body: ForkRequest | None = None) -> ForkView:
        return await service.call(service.fork, session_id, body or ForkRequest())

    return router
