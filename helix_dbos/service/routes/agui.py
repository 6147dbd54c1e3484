"""The AG-UI endpoint: what ``@ag-ui/client``'s ``HttpAgent`` (and CopilotKit over it) speaks, unmodified.

``POST /v1/agui`` takes a ``RunAgentInput`` and answers with the run as AG-UI events over SSE
(``data: <event JSON>`` blocks, newline line ends). So in Node or a browser::

    new HttpAgent({ url: "/v1/agui", headers: { Authorization: "Bearer ..." }, threadId })

The thread maps to one session (deterministic, scoped to the caller); a post is a new turn or the
client's answers to the calls the run parked on (:mod:`helix_dbos.service.agui`); the translation
of chunks into events is :mod:`helix_dbos.service.agui_events`.

**Resuming.** Every event that ends a stored chunk's events carries ``id: <stream sequence>``.
``GET /v1/agui/threads/{threadId}/stream`` re-attaches to the thread's latest run: with
``Last-Event-ID`` (or ``?after=``) it goes on after that chunk, re-opening the step and message
that were open there (``RUN_STARTED``, ``STATE_SNAPSHOT``, ``STEP_STARTED``, ``TEXT_MESSAGE_START``
for the same message id), so the client's message continues; without, it replays the run from its
start (for a client that holds nothing of it yet). The run itself never depended on the connection:
it is a DBOS workflow, and the stream it writes is durable.
"""

# No ``from __future__ import annotations``: FastAPI reads route signatures at runtime.
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Path, Query, Request
from fastapi.routing import APIRouter
from sse_starlette import EventSourceResponse, ServerSentEvent

from helix_dbos.errors import HelixError, public_error_message
from helix_dbos.service.agui import AGUIAnswers, RunAgentInput, plan_run, thread_session_id
from helix_dbos.service.agui_events import AGUIEvent, AGUIEventTranslator, event_json
from helix_dbos.service.agui_operations import AGUIReply, answer_calls, reattach, start_turn
from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import (
    CONFLICTS,
    MISMATCH,
    NOT_FOUND,
    REFUSED_IN_STREAM,
    TENANT_BUDGET,
    AfterQuery,
    LastEventId,
    RouteContext,
    caller_scope,
    caller_tenant,
)
from helix_dbos.service.sse import detach_reader, is_latest_chunk, parse_after, read_failure
from helix_dbos.stream.base import ChunkRecord

__all__ = ["agui_router"]

AGUI_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

ThreadIdPath = Annotated[str, Path(min_length=1, max_length=400, description="The AG-UI `threadId`.")]
RunIdQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=400,
        description="The AG-UI `runId` to name in `RUN_STARTED` (default: the helix run id).",
    ),
]

PROTOCOL_DOC = (
    " Answers `text/event-stream` with one AG-UI event per `data:` block: `RUN_STARTED`, `STATE_SNAPSHOT`, "
    "`STEP_STARTED`/`STEP_FINISHED`, `TEXT_MESSAGE_START`/`CONTENT`/`END`, `REASONING_*`, "
    "`TOOL_CALL_START`/`ARGS`/`END`/`RESULT`, `STATE_DELTA`, `CUSTOM`, then `RUN_FINISHED` (its `outcome`: "
    "`success`, with `pendingToolCallIds` when client tools wait; `interrupt` for approvals; `cancelled`) "
    "or `RUN_ERROR`. Events closing a stored chunk carry `id:` (its stream sequence) for `Last-Event-ID`."
)


async def refusal_events(thread_id: str, run_id: str, message: str, code: str) -> AsyncIterator[ServerSentEvent]:
    """The run of a refused body: ``RUN_STARTED``, then ``RUN_ERROR`` with the refusal's code."""
    yield _event({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id})
    for event in AGUIEventTranslator.fail(message, code):
        yield _event(event)


def _event(event: AGUIEvent, sequence: int | None = None) -> ServerSentEvent:
    # ``\n`` line ends: HttpAgent splits events on a blank line written as ``\n\n``.
    return ServerSentEvent(data=event_json(event), id=None if sequence is None else str(sequence), sep="\n")


async def agui_events(
    ctx: RouteContext, reply: AGUIReply, translator: AGUIEventTranslator, records: AsyncIterator[ChunkRecord]
) -> AsyncIterator[ServerSentEvent]:
    """The run's events: the start, one batch per chunk after ``reply.emit_after``, the end.

    A pause or an interrupt ends the AG-UI run only while it is the stream's latest chunk: a replay
    passes over a pause the client has answered since.
    """
    ending: list[AGUIEvent] = []
    started = False
    try:
        async for record in records:
            if record.sequence <= reply.run_start:
                translator.consume_state(record)
                continue
            if record.sequence <= reply.emit_after:
                translator.consume(record)
                continue
            if not started:
                started = True
                for event in translator.start():
                    yield _event(event)
            events = translator.translate(record)
            for i, event in enumerate(events):
                yield _event(event, record.sequence if i == len(events) - 1 else None)
            if translator.pauses_at(record.chunk) and await is_latest_chunk(
                ctx.executor.streams, reply.stream_id, record.sequence
            ):
                ending = translator.finish(record.chunk)
                break
        else:
            ending = translator.finish()
    except Exception as exc:
        ending = translator.fail(*read_failure(exc, "run"))
    finally:
        await detach_reader(records)
    if not started:
        for event in translator.start():
            yield _event(event)
    for event in ending:
        yield _event(event)


def agui_router(ctx: RouteContext) -> APIRouter:
    """``POST /v1/agui`` and its re-attach, ``GET /v1/agui/threads/{thread_id}/stream``."""
    router = ctx.router()
    service = ctx.service
    executor = ctx.executor

    async def respond(reply: AGUIReply, thread_id: str, run_id: str) -> EventSourceResponse:
        translator = AGUIEventTranslator(
            thread_id=thread_id,
            run_id=run_id,
            session_id=reply.session_id,
            message_prefix=reply.run_id,
            client_tools=reply.client_tools,
            state=reply.state.state,
            state_checkpoint=reply.state.checkpoint_id,
        )
        records = await service.open_stream(reply.stream_id, reply.read_from)
        return ctx.event_stream(agui_events(ctx, reply, translator, records), AGUI_HEADERS)

    @router.post(
        "/agui",
        tags=["agui"],
        name="agui_run",
        response_class=EventSourceResponse,
        description="AG-UI (`@ag-ui/client`'s `HttpAgent`, CopilotKit): one AG-UI run of a thread. A user message "
        "last starts the next turn (a repeat of the same `runId` finds the same run); tool messages last "
        "answer the client-executed calls the run waits for, and `resume` entries its approval interrupts. "
        "`forwardedProps.agent` names the agent when the service serves several; `state` seeds a new "
        "thread's custom state. A body its schema allows that it cannot act on (no user text or tool results "
        "last, no agent named when several are served) answers a run whose only events are `RUN_STARTED` and "
        "`RUN_ERROR` (`code: validation_error`)." + PROTOCOL_DOC,
        responses=error_responses(
            "state_agent_not_found", "state_session_not_found", *CONFLICTS, *MISMATCH, TENANT_BUDGET, body=True
        ),
    )
    async def agui_run(request: Request, body: RunAgentInput) -> EventSourceResponse:
        session_id = thread_session_id(body.threadId, caller_scope(request))
        try:
            plan = plan_run(body)
            if isinstance(plan, AGUIAnswers):
                reply = await service.call(answer_calls, executor, session_id, plan)
            else:
                tenant = caller_tenant(request)
                reply = await service.call(start_turn, executor, session_id, body.forwardedProps, plan, tenant)
        except HelixError as exc:
            if exc.code not in REFUSED_IN_STREAM:
                raise
            # A body its schema allows that asks nothing the service can do: the client shows a
            # RUN_ERROR as the run's failure (HttpAgent's onRunErrorEvent), as for any failed run.
            return EventSourceResponse(
                refusal_events(body.threadId, body.runId, public_error_message(exc), exc.code),
                headers=AGUI_HEADERS,
                sep="\n",
            )
        return await respond(reply, body.threadId, body.runId)

    @router.get(
        "/agui/threads/{thread_id}/stream",
        tags=["agui"],
        name="agui_stream",
        response_class=EventSourceResponse,
        description="Re-attach to the thread's latest run: after the `Last-Event-ID` header (or `?after=`), "
        "re-opening the step and message open there so the client's message continues, or from the run's "
        "start without one." + PROTOCOL_DOC,
        responses=error_responses(NOT_FOUND),
    )
    async def agui_stream(
        request: Request,
        thread_id: ThreadIdPath,
        after: AfterQuery = None,
        last_event_id: LastEventId = None,
        runId: RunIdQuery = None,  # the protocol's own spelling
    ) -> EventSourceResponse:
        session_id = thread_session_id(thread_id, caller_scope(request))
        reply = await service.call(reattach, executor, session_id, parse_after(last_event_id, after))
        return await respond(reply, thread_id, runId or reply.run_id)

    return router
