"""The chat routes in the AI SDK's UI message stream protocol: what ``useChat`` speaks, unmodified.

``POST /v1/chat/ui`` takes ``DefaultChatTransport``'s body (``{id, messages, trigger, messageId}``
plus ``agent`` from the transport's ``body``) and answers with the reply as a UI message stream;
``GET /v1/chat/ui/{id}/stream`` is the transport's reconnect (``useChat({resume: true})``,
``chat.resumeStream()``): the reply of the run in flight from its start, or ``204`` when none is.
So in the browser::

    new DefaultChatTransport({ api: "/v1/chat/ui", headers: { Authorization: "Bearer ..." } })

The chat id maps to one session (deterministic, scoped to the caller); a post is a new turn or
the browser's answers to client-executed and approval-gated tools (see
:mod:`helix_dbos.service.ui_chat`); the translation of chunks into parts is
:mod:`helix_dbos.service.ui_stream`. The reply's ``start`` part carries ``{sessionId, runId}`` as
message metadata, for the session routes (interrupt, abort, status). The other chat routes keep
helix-dbos's own event format.
"""

# No ``from __future__ import annotations``: FastAPI reads route signatures at runtime.
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Header, Path, Request
from fastapi.responses import Response
from fastapi.routing import APIRouter
from sse_starlette import EventSourceResponse, ServerSentEvent

from helix_dbos.double_text import DoubleTextPolicy
from helix_dbos.errors import HelixError, public_error_message
from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import (
    CONFLICTS,
    MISMATCH,
    REFUSED_IN_STREAM,
    TENANT_BUDGET,
    RouteContext,
    caller_scope,
    caller_tenant,
)
from helix_dbos.service.sse import detach_reader, is_latest_chunk, read_failure
from helix_dbos.service.ui_chat import Answers, UIChatRequest, chat_session_id, plan_request
from helix_dbos.service.ui_operations import UIReply, answer_tools, replay_current_run, start_turn
from helix_dbos.service.ui_stream import (
    UI_MESSAGE_STREAM_DONE,
    UI_MESSAGE_STREAM_HEADERS,
    UIMessagePart,
    UIMessageStreamTranslator,
    ends_reply,
    part_json,
)
from helix_dbos.stream.base import ChunkRecord

__all__ = ["ui_chat_router"]

DoubleTextHeader = Annotated[
    DoubleTextPolicy | None,
    Header(
        alias="x-helix-double-text",
        description="The double-texting policy of the post (`reject`, `enqueue`, `interrupt`, `rollback`, "
        "`steer`), when the transport cannot add it to the body.",
    ),
]
ChatIdPath = Annotated[str, Path(min_length=1, max_length=400, description="The chat id (`useChat`'s `id`).")]

PROTOCOL_DOC = (
    " Answers `text/event-stream` in the AI SDK's UI message stream protocol (header "
    "`x-vercel-ai-ui-message-stream: v1`): one JSON part per `data:` line (`start`, `start-step`, "
    "`text-start`/`-delta`/`-end`, `reasoning-*`, `tool-input-available`, `tool-approval-request`, "
    "`tool-output-available`/`-error`/`-denied`, `data-state-patch`, `data-<event>`, `finish-step`, "
    "`finish`, `error`), then `data: [DONE]`."
)


async def refusal_events(error_text: str) -> AsyncIterator[ServerSentEvent]:
    """A reply that is only the refusal: ``error``, then ``[DONE]``."""
    yield _event({"type": "error", "errorText": error_text})
    yield ServerSentEvent(data=UI_MESSAGE_STREAM_DONE, sep="\n")


def _event(part: UIMessagePart) -> ServerSentEvent:
    # ``\n`` line ends: byte for byte what the AI SDK's own servers send (``data: {...}\n\n``).
    return ServerSentEvent(data=part_json(part), sep="\n")


async def ui_events(ctx: RouteContext, reply: UIReply, records: AsyncIterator[ChunkRecord]) -> AsyncIterator[Any]:
    """The reply's parts as SSE events, ending with ``finish`` (or ``error``) and ``[DONE]``.

    A pause or an interrupt ends the reply only while it is the stream's latest chunk: a replay
    passes over a pause the browser has answered since.
    """
    translator = UIMessageStreamTranslator(known_tool_calls=reply.known_tool_calls, approval_calls=reply.approval_calls)
    metadata = {"sessionId": reply.session_id, **({"runId": reply.run_id} if reply.run_id else {})}
    ending: list[UIMessagePart] = []
    try:
        for part in translator.start(reply.message_id, metadata):
            yield _event(part)
        ended = False
        async for record in records:
            for part in translator.translate(record.chunk):
                yield _event(part)
            reason = ends_reply(record.chunk)
            if reason is not None and await is_latest_chunk(ctx.executor.streams, reply.stream_id, record.sequence):
                ending = translator.finish(reason)
                ended = True
                break
        if not ended:
            ending = translator.finish("stop")
    except Exception as exc:
        message, _code = read_failure(exc, "reply")  # the protocol's error part has no code
        ending = translator.fail(message)
    finally:
        await detach_reader(records)
    for part in ending:
        yield _event(part)
    yield ServerSentEvent(data=UI_MESSAGE_STREAM_DONE, sep="\n")


def ui_chat_router(ctx: RouteContext) -> APIRouter:
    """``POST /v1/chat/ui`` and its reconnect, ``GET /v1/chat/ui/{id}/stream``."""
    router = ctx.router()
    service = ctx.service
    executor = ctx.executor

    async def respond(reply: UIReply) -> EventSourceResponse:
        records = await service.open_stream(reply.stream_id, reply.after)
        return ctx.event_stream(ui_events(ctx, reply, records), UI_MESSAGE_STREAM_HEADERS)

    @router.post(
        "/chat/ui",
        tags=["chat"],
        name="ui_chat",
        response_class=EventSourceResponse,
        description="The AI SDK's chat endpoint (`useChat` with `DefaultChatTransport`): the last message is the "
        "user's next turn (a repeat of the same message id finds the same run), or the assistant message "
        "carrying the browser's tool outputs and approval responses, which answer the calls the run waits "
        "for. A post it cannot act on (no text, no agent named when several are served) answers a stream "
        "whose only part is `error`." + PROTOCOL_DOC,
        responses=error_responses(
            "state_agent_not_found", "state_session_not_found", *CONFLICTS, *MISMATCH, TENANT_BUDGET, body=True
        ),
    )
    async def ui_chat(
        request: Request, body: UIChatRequest, double_text_header: DoubleTextHeader = None
    ) -> EventSourceResponse:
        session_id = chat_session_id(body.id, caller_scope(request))
        try:
            plan = plan_request(body)
            policy = body.double_text or double_text_header
            if isinstance(plan, Answers):
                reply = await service.call(answer_tools, executor, session_id, plan)
            else:
                reply = await service.call(
                    start_turn, executor, session_id, body.agent, plan, caller_tenant(request), policy
                )
        except HelixError as exc:
            if exc.code not in REFUSED_IN_STREAM:
                raise
            # A well-formed post the service cannot act on (no text, no agent named, NUL in the
            # text): ``useChat`` shows an ``error`` part as the chat's error, like any failure.
            return EventSourceResponse(
                refusal_events(public_error_message(exc)), headers=UI_MESSAGE_STREAM_HEADERS, sep="\n"
            )
        return await respond(reply)

    @router.get(
        "/chat/ui/{chat_id}/stream",
        tags=["chat"],
        name="ui_chat_stream",
        response_class=EventSourceResponse,
        description="The AI SDK transport's reconnect: the reply of the chat's run in flight, replayed from its "
        "first part, or `204` when no run is in flight." + PROTOCOL_DOC,
        responses={204: {"description": "No run in flight: nothing to resume."}, **error_responses()},
    )
    async def ui_chat_stream(request: Request, chat_id: ChatIdPath) -> Response:
        session_id = chat_session_id(chat_id, caller_scope(request))
        reply = await service.call(replay_current_run, executor, session_id)
        if reply is None:
            return Response(status_code=204)
        return await respond(reply)

    return router
