"""Agent schedules over HTTP: ``/v1/schedules``, the service face of ``executor.schedules``.

Create, list, show, pause, resume, delete and backfill cron schedules that start an agent run at
each fire time (:mod:`helix_dbos.runtime.schedules`), and list a schedule's fires with what each
did. Refusals are typed: an invalid cron expression, time zone or backfill window is a 422
(``validation_invalid_schedule``), an unknown schedule a 404 (``state_schedule_not_found``), an
agent the server does not serve a 404 (``state_agent_not_found``), a name taken a 409
(``state_conflict``). A schedule belongs to the caller's tenant: its fires run in that tenant's
sessions, and another tenant's schedule is not found (404), as another tenant's session is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Path, Query, Request
from fastapi.routing import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.runtime.schedules import AgentSchedule, BackfillResult, ScheduleBook, ScheduleFire, ScheduleInfo
from helix_dbos.runtime.schedules.model import SCHEDULE_NAME_PATTERN
from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import RouteContext, caller_tenant

__all__ = ["BackfillRequest", "ScheduleDeleted", "ScheduleList", "schedules_router"]

ScheduleName = Annotated[str, Path(description="The schedule's name.", pattern=SCHEDULE_NAME_PATTERN)]
NOT_FOUND = "state_schedule_not_found"
INVALID = "validation_invalid_schedule"


class ScheduleList(BaseModel):
    """``GET /v1/schedules``: every agent schedule, by name."""

    schedules: list[ScheduleInfo]


class ScheduleDeleted(BaseModel):
    """``DELETE /v1/schedules/{name}``: the schedule is gone; its runs and sessions stay."""

    name: str
    deleted: bool = True


class BackfillRequest(BaseModel):
    """The window to backfill: each fire time strictly between ``start`` and ``end`` runs once."""

    model_config = ConfigDict(extra="forbid")

    start: datetime = Field(description="Start of the window (exclusive); without a zone, UTC.")
    end: datetime = Field(description="End of the window (exclusive); at most 1000 fire times in between.")


def schedules_router(ctx: RouteContext) -> APIRouter:
    """The agent schedule routes (authenticated, like every ``/v1`` route)."""
    router = ctx.router()
    service = ctx.service

    def book() -> ScheduleBook:
        # Looked up per request, not when the routes are built: a service whose every request is
        # denied (fail-closed auth) never touches its executor.
        return ctx.executor.schedules

    @router.post(
        "/schedules",
        response_model=ScheduleInfo,
        status_code=201,
        tags=["schedules"],
        description="Create a cron schedule that starts `agent` with `message` at each fire time: a new session "
        "per fire, or one more turn of `session_id` (a fire while that session has a run in flight is skipped "
        "and recorded). `missed_fires` says what happens to fire times that passed while no worker ran.",
        responses=error_responses(INVALID, "state_agent_not_found", "state_conflict", body=True),
    )
    async def create(request: Request, body: AgentSchedule) -> ScheduleInfo:
        mine = body.model_copy(update={"tenant": caller_tenant(request)})  # fires run in the caller's tenant
        return await service.call(book().create, mine)

    @router.get("/schedules", response_model=ScheduleList, tags=["schedules"], responses=error_responses())
    async def list_schedules(request: Request) -> ScheduleList:
        """The caller's tenant's agent schedules with their status (`active`, `paused`) and last fire time."""
        return ScheduleList(schedules=await service.call(book().list, tenant=caller_tenant(request)))

    @router.get(
        "/schedules/{name}", response_model=ScheduleInfo, tags=["schedules"], responses=error_responses(NOT_FOUND)
    )
    async def get_schedule(request: Request, name: ScheduleName) -> ScheduleInfo:
        """One schedule (another tenant's is not found)."""
        return await service.call(book().get, name, tenant=caller_tenant(request))

    @router.post(
        "/schedules/{name}/pause",
        response_model=ScheduleInfo,
        tags=["schedules"],
        responses=error_responses(NOT_FOUND, body=True),
    )
    async def pause(request: Request, name: ScheduleName) -> ScheduleInfo:
        """Stop firing (within about a second); the fire times until a resume are not run."""
        return await service.call(book().pause, name, tenant=caller_tenant(request))

    @router.post(
        "/schedules/{name}/resume",
        response_model=ScheduleInfo,
        tags=["schedules"],
        responses=error_responses(NOT_FOUND, body=True),
    )
    async def resume(request: Request, name: ScheduleName) -> ScheduleInfo:
        """Fire again from the next fire time; the paused window is not caught up (backfill it to run it)."""
        return await service.call(book().resume, name, tenant=caller_tenant(request))

    @router.delete(
        "/schedules/{name}",
        response_model=ScheduleDeleted,
        tags=["schedules"],
        responses=error_responses(NOT_FOUND),
    )
    async def delete(request: Request, name: ScheduleName) -> ScheduleDeleted:
        """Remove the schedule; fires already enqueued still run."""
        await service.call(book().delete, name, tenant=caller_tenant(request))
        return ScheduleDeleted(name=name)

    @router.post(
        "/schedules/{name}/backfill",
        response_model=BackfillResult,
        tags=["schedules"],
        responses=error_responses(NOT_FOUND, INVALID, body=True),
    )
    async def backfill(request: Request, name: ScheduleName, body: BackfillRequest) -> BackfillResult:
        """Run each fire time of the window that has not fired, once; a second backfill adds nothing."""
        return await service.call(book().backfill, name, body.start, body.end, tenant=caller_tenant(request))

    @router.get(
        "/schedules/{name}/fires",
        response_model=list[ScheduleFire],
        tags=["schedules"],
        responses=error_responses(NOT_FOUND),
    )
    async def fires(
        request: Request, name: ScheduleName, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> list[ScheduleFire]:
        """The schedule's latest fires, newest first, each with its outcome (the run it started, or why not)."""
        return await service.call(book().fires, name, limit=limit, tenant=caller_tenant(request))

    return router
