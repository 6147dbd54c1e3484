"""What the web inspector reads beyond the seeds' routes: served agents, sessions, timeline, state.

The seeds' ``AgentServer`` answers one session at a time; an operator looking at a deployment first
needs the agents it can start, the list (status, agent, turns, last update, cost), then one
session's steps with their durations, tokens and cost. All are plain authenticated ``/v1`` routes,
so a script can read what the inspector (:mod:`helix_dbos.service.ui`) shows. The timeline is the
one ``helix-dbos sessions show`` prints (:mod:`helix_dbos.views.timeline`), so the terminal and the
browser never disagree.
"""

from typing import Annotated, Any

from dbos import DBOS
from fastapi import Query, Request
from fastapi.routing import APIRouter
from pydantic import BaseModel, ConfigDict

from helix_dbos.compaction import ModelView, model_view
from helix_dbos.errors import public_error_message
from helix_dbos.runtime.rate_limits import rate_limit_waits
from helix_dbos.service.errors import error_responses
from helix_dbos.service.operations import ServiceOperations
from helix_dbos.service.routes.context import MAX_SEQUENCE, NOT_FOUND, RouteContext, SessionIdPath, caller_tenant
from helix_dbos.session import SessionStatus
from helix_dbos.store.base import SessionRecord
from helix_dbos.views.timeline import build_timeline, totals
from helix_dbos.views.usage_view import summarise

__all__ = [
    "AgentListView",
    "AgentView",
    "SessionListView",
    "SessionSummaryView",
    "StateView",
    "TimelineView",
    "inspector_router",
    "served_agents",
    "session_timeline",
]


class AgentView(BaseModel):
    """One agent the service serves."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """What ``POST /v1/runs`` takes as ``agent``."""
    description: str
    """The agent's description (empty when its definition gives none)."""


class AgentListView(BaseModel):
    """The agents the service serves, by name.

    Those named on its command line and the agents they delegate to (sub-agents, companions),
    which a run may start too.
    """

    model_config = ConfigDict(extra="forbid")

    agents: list[AgentView]


class SessionSummaryView(BaseModel):
    """One row of the sessions list."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    agent: str
    status: SessionStatus
    turn: int
    step_count: int
    message_count: int
    created_at: int
    """Milliseconds since the epoch."""
    updated_at: int
    """Milliseconds since the epoch: the list is ordered by it, newest first."""
    cost_usd: float
    """What the session's successful LLM calls cost (its sub-agents' sessions included)."""
    total_tokens: int
    error: str | None = None


class SessionListView(BaseModel):
    """A page of sessions, most recently updated first."""

    model_config = ConfigDict(extra="forbid")

    items: list[SessionSummaryView]
    offset: int
    limit: int
    has_more: bool
    """Whether a page after this one has at least one session."""


class TimelineView(BaseModel):
    """A session's runs, each with its steps: duration, tokens, cost and tool calls per step.

    Each run is the ``runs[]`` item of ``helix-dbos sessions show --json`` (its keys are stable):
    ``run_id``, ``turn``, ``mode``, ``status``, ``started_at_ms``, ``completed_at_ms``,
    ``duration_ms``, ``waiting_for_rate_limit`` (the provider limit whose admission a running run's
    model call waits for, else ``null``), ``totals`` and ``steps[]`` (``step``, ``checkpoint_id``, ``status``,
    ``duration_ms``, ``model``, ``input_tokens``, ``output_tokens``, ``cost_usd``, ``tool_calls``...).
    A step's ``checkpoint_id`` is what ``retry`` and ``fork`` take.
    """

    model_config = ConfigDict(extra="forbid")

    session_id: str
    totals: dict[str, Any]
    runs: list[dict[str, Any]]


class StateView(BaseModel):
    """A session's custom state as its latest committed step left it."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    state: dict[str, Any]


def _summary(ops: ServiceOperations, session: SessionRecord) -> SessionSummaryView:
    usage = ops.executor.get_usage_summary(session.session_id)
    return SessionSummaryView(
        session_id=session.session_id,
        agent=session.agent_type,
        status=session.status,
        turn=session.turn,
        step_count=session.step_count,
        message_count=session.message_count,
        created_at=session.created_at,
        updated_at=session.updated_at,
        cost_usd=usage.cost_usd,
        total_tokens=usage.total_tokens,
        error=public_error_message(session.error) if session.error else None,
    )


def list_sessions(
    ops: ServiceOperations,
    status: SessionStatus | None,
    agent: str | None,
    offset: int,
    limit: int,
    tenant: str | None = None,
) -> SessionListView:
    """A page of sessions (``tenant``'s only, when given).

    One more row is read than shown, to know whether another page exists.
    """
    found = ops.executor.reads.list_sessions(
        status=status, agent_type=agent, limit=limit + 1, offset=offset, tenant=tenant
    )
    return SessionListView(
        items=[_summary(ops, s) for s in found[:limit]], offset=offset, limit=limit, has_more=len(found) > limit
    )


def served_agents(ops: ServiceOperations) -> AgentListView:
    """The registry's agents, sorted by name (no I/O: the registry is in memory)."""
    registry = ops.executor.registry
    found = (registry.get(name) for name in registry.names())
    return AgentListView(agents=[AgentView(name=a.name, description=a.description) for a in found if a is not None])


def session_timeline(ops: ServiceOperations, session_id: str) -> TimelineView:
    """The session's runs and steps (blocking: run it in the service's pool)."""
    ops.require_session(session_id)
    reads = ops.executor.reads
    runs = reads.list_runs(session_id)
    checkpoints = reads.list_checkpoints(session_id, limit=100_000).items
    usage = {r.run_id: summarise(reads.get_usage(session_id, run_id=r.run_id)) for r in runs}
    timelines = build_timeline(runs, checkpoints, usage)
    waits = rate_limit_waits(DBOS, [r.run_id for r in runs if r.status == "running"])
    rendered = []
    for timeline in timelines:
        run = timeline.to_json()
        run["waiting_for_rate_limit"] = waits.get(timeline.run.run_id)
        # What a run's error says leaves through the same filter as every other error text.
        run["error"] = public_error_message(run["error"]) if run["error"] else None
        rendered.append(run)
    return TimelineView(
        session_id=session_id,
        totals=totals([step.usage for t in timelines for step in t.steps]),
        runs=rendered,
    )


def inspector_router(ctx: RouteContext) -> APIRouter:
    """The served agents, the sessions list and a session's step timeline."""
    router = ctx.router()
    service = ctx.service

    @router.get(
        "/agents",
        response_model=AgentListView,
        tags=["sessions"],
        description="The agents this service serves, sorted by name: what `POST /v1/runs` takes as `agent`.",
        responses=error_responses(),
    )
    async def get_agents() -> AgentListView:
        return served_agents(service)

    @router.get(
        "/sessions",
        response_model=SessionListView,
        tags=["sessions"],
        description="The caller's tenant's sessions, most recently updated first, with their cost and tokens "
        "(sub-agents included); filter by `status` and `agent`, page with `offset` and `limit`.",
        responses=error_responses(),
    )
    async def get_sessions(
        request: Request,
        status: SessionStatus | None = None,
        agent: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        offset: Annotated[int, Query(ge=0, le=MAX_SEQUENCE)] = 0,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
    ) -> SessionListView:
        return await service.call(list_sessions, service, status, agent, offset, limit, caller_tenant(request))

    @router.get(
        "/sessions/{session_id}/timeline",
        response_model=TimelineView,
        tags=["sessions"],
        description="The session's runs, each with its steps: duration, tokens, cost, tool calls, and the "
        "checkpoint id that `retry` and `fork` take (what `helix-dbos sessions show` prints).",
        responses=error_responses(NOT_FOUND),
    )
    async def get_timeline(session_id: SessionIdPath) -> TimelineView:
        return await service.call(session_timeline, service, session_id)

    @router.get(
        "/sessions/{session_id}/model-view",
        response_model=ModelView,
        tags=["sessions"],
        description="What the model saw at one step of a run (after its system prompt): the compacted "
        "messages (the summary and cleared tool results marked) and what became of each transcript message "
        "(seen, dropped, cleared). `run_id` and `step` are a timeline step's; a step without a model call is "
        "`state_checkpoint_not_found`.",
        responses=error_responses(NOT_FOUND, "state_checkpoint_not_found"),
    )
    async def get_model_view(
        session_id: SessionIdPath,
        run_id: Annotated[str, Query(min_length=1, max_length=400)],
        step: Annotated[int, Query(ge=0, le=MAX_SEQUENCE)],
    ) -> ModelView:
        return await service.call(model_view, service.executor.reads, session_id, run_id, step)

    @router.get(
        "/sessions/{session_id}/state",
        response_model=StateView,
        tags=["sessions"],
        description="The session's custom state as of its latest committed step (the stream's `state_patch` "
        "chunks say how it got there).",
        responses=error_responses(NOT_FOUND),
    )
    async def get_state(session_id: SessionIdPath) -> StateView:
        session = await service.call(service.require_session, session_id)
        return StateView(session_id=session_id, state=session.custom_state)

    return router
