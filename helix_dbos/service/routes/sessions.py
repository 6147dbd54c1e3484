"""Starting runs and reading sessions: ``POST /v1/runs`` and the ``GET /v1/sessions/{id}...`` reads."""

from typing import Annotated

from fastapi import Query, Request
from fastapi.routing import APIRouter

from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import (
    CONFLICTS,
    MAX_SEQUENCE,
    MISMATCH,
    NOT_FOUND,
    TENANT_BUDGET,
    RouteContext,
    SessionIdPath,
    caller_scope,
    caller_tenant,
)
from helix_dbos.service.schemas import (
    RunAccepted,
    RunResultView,
    RunView,
    SessionSnapshot,
    StartRunRequest,
    StreamView,
)
from helix_dbos.service.sse import stream_info
from helix_dbos.store.base import PaginatedMessages

__all__ = ["sessions_router"]


def sessions_router(ctx: RouteContext) -> APIRouter:
    """Start a run; read a session's snapshot, transcript, runs and current result."""
    router = ctx.router()
    service = ctx.service
    read_errors = error_responses(NOT_FOUND)

    @router.post(
        "/runs",
        status_code=202,
        response_model=RunAccepted,
        tags=["runs"],
        description="Seeds' `POST /start`. Starts a run: a new session, or the next turn of a `completed` "
        "session given by `session_id`. An identical request while the run is in flight, or a repeat with the "
        "same `idempotency_key` (without `session_id`: for the same caller), returns the same run. A different "
        "request while a run is in flight follows `double_text` (default: the agent's policy; `reject` is a 409).",
        responses=error_responses("state_agent_not_found", *CONFLICTS, *MISMATCH, TENANT_BUDGET, body=True),
    )
    async def start_run(request: Request, body: StartRunRequest) -> RunAccepted:
        scope = caller_scope(request)
        started = await service.call(service.start, body, scope, caller_tenant(request))
        session_id, run_id, status, receipt = started
        return ctx.accepted(request, (session_id, run_id, status), receipt)

    @router.get(
        "/sessions/{session_id}",
        response_model=SessionSnapshot,
        tags=["sessions"],
        description="Seeds' `GET /status`: session status, current run, pending tool calls, whether it can "
        "be resumed, the stream's status (`active|paused|ended|failed`), and `usage`: the tokens, cost, calls and "
        "durations of every run of the session and of its sub-agents' sessions.",
        responses=read_errors,
    )
    async def get_session(session_id: SessionIdPath) -> SessionSnapshot:
        snapshot = await service.call(service.snapshot, session_id)
        info = await stream_info(ctx.executor.streams, session_id)
        if info is not None:
            snapshot.stream = StreamView(status=info.status, latest_sequence=info.latest_sequence)
        return snapshot

    @router.get(
        "/sessions/{session_id}/messages",
        response_model=PaginatedMessages,
        tags=["sessions"],
        description="A page of the session's transcript, in order.",
        responses=read_errors,
    )
    async def get_messages(
        session_id: SessionIdPath,
        offset: Annotated[int, Query(ge=0, le=MAX_SEQUENCE)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> PaginatedMessages:
        return await service.call(service.messages, session_id, offset, limit)

    @router.get(
        "/sessions/{session_id}/runs",
        response_model=list[RunView],
        tags=["sessions"],
        description="Every run of the session, by turn.",
        responses=read_errors,
    )
    async def get_runs(session_id: SessionIdPath) -> list[RunView]:
        return await service.call(service.runs, session_id)

    @router.get(
        "/sessions/{session_id}/result",
        response_model=RunResultView,
        tags=["sessions"],
        description="The `AgentResult` of the session's current run, waiting up to `timeout_seconds` for it "
        "to finish; 408 (code `transport_result_timeout`, retryable) when it is still running then. An aborted "
        "run answers at once: `status` `failed`, `aborted` true, with the `abort_reason`.",
        responses=error_responses(NOT_FOUND, "transport_result_timeout"),
    )
    async def get_result(
        session_id: SessionIdPath,
        # The bound is this app's setting, so the annotation closes over it (hence a router factory).
        timeout_seconds: Annotated[float, Query(ge=0, le=ctx.max_result_wait_seconds)] = 30.0,
    ) -> RunResultView:
        return await service.wait(service.result, session_id, timeout_seconds)

    return router
