"""A resumable SSE endpoint for any ASGI app (the seeds' ``createResumableStreamHandler``).

``helix-dbos serve`` streams sessions with this handler, and an application that hosts agents in its
own Starlette or FastAPI app can serve a stream the same way, with the same wire format
(:mod:`helix_dbos.stream.events`)::

    handler = create_resumable_stream_handler(stream_manager=manager)

    @app.get("/streams/{stream_id}")
    async def stream(request: Request, stream_id: str) -> Response:
        return await handler.handle_request(request, stream_id)

Each chunk event's SSE ``id`` is its stream sequence. A client that reconnects with
``Last-Event-ID: n`` (a browser ``EventSource`` does so by itself) gets every chunk after ``n``
exactly once: sequences are never reused, not even after chunks were removed. The handler ends the
response with ``end``, ``fail`` or ``truncated``; comment pings keep idle connections open through
proxies; error text (``fail`` events, ``error`` chunks) goes through
:func:`~helix_dbos.errors.public_error_message`, so what a database driver wrote stays in the logs.

The response is sse-starlette's ``EventSourceResponse`` (a Starlette ``Response``, itself an ASGI
app), part of the ``server`` extra: this module fails at import with the install hint without it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

try:
    import anyio
    from sse_starlette import EventSourceResponse, ServerSentEvent
    from starlette.responses import JSONResponse, Response
except ImportError as exc:  # pragma: no cover - exercised only without the server extra
    raise ModuleNotFoundError(
        f"helix_dbos.stream.resumable needs sse-starlette ({exc.name} is not installed): "
        "pip install 'helix-dbos[server]'",
        name=exc.name,
    ) from exc

from helix_dbos.errors import HelixError, StreamTruncatedError, public_error_message
from helix_dbos.stream.base import ChunkRecord, StreamManager
from helix_dbos.stream.capabilities import RecordReader
from helix_dbos.stream.chunks import ErrorChunk, RunPausedChunk, RunResumedChunk
from helix_dbos.stream.events import (
    StreamChunkEvent,
    StreamEndEvent,
    StreamEvent,
    StreamFailEvent,
    StreamStatusEvent,
    StreamTruncatedEvent,
    to_sse_message,
)

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = [
    "LAST_EVENT_ID_PATTERN",
    "SSE_HEADERS",
    "RecordOpener",
    "ResumableStreamHandler",
    "create_resumable_stream_handler",
    "extract_resume_position",
    "records_from_manager",
    "sse_response",
    "stream_events",
]

logger = logging.getLogger("helix_dbos.stream")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""Keep proxies (nginx) from buffering or caching the stream."""

LAST_EVENT_ID_PATTERN = r"^[0-9]{1,18}$"
"""A ``Last-Event-ID`` the handler accepts: a stream sequence it sent as an event ``id``."""

RecordOpener = Callable[[str, int], Awaitable[AsyncIterator[ChunkRecord] | None]]
"""``open(stream_id, after_sequence)``: the live records after a sequence, ``None`` for an unknown stream."""


def extract_resume_position(last_event_id: str | None, after: int | str | None = None) -> int | None:
    """The sequence to resume after: ``Last-Event-ID`` wins over ``?after=`` (the seeds' ``extractResumePosition``).

    Browsers' ``EventSource`` reconnects to the same URL (``?after=`` included) with the id of the
    last event it saw, so the header is the newer position. ``None`` when neither is given; raises
    ``ValueError`` for a value that is not a sequence (digits).
    """
    for value in (last_event_id, after):
        if value is None:
            continue
        text = str(value).strip()
        if not text:
            continue
        if not text.isdigit() or len(text) > 18:
            raise ValueError(f"Not a stream sequence: {text[:40]!r}")
        return int(text)
    return None


async def records_from_manager(
    manager: StreamManager, stream_id: str, after_sequence: int
) -> AsyncIterator[ChunkRecord] | None:
    """The live records of ``stream_id`` after ``after_sequence``, read on the caller's event loop."""
    reader = await manager.create_resumable_reader(stream_id, from_sequence=after_sequence)
    if reader is None:
        return None

    async def records() -> AsyncIterator[ChunkRecord]:
        paired = reader if isinstance(reader, RecordReader) else None
        try:
            while True:
                try:
                    if paired is not None:
                        yield await paired.next_record()
                    else:
                        chunk = await reader.__anext__()
                        yield ChunkRecord(sequence=reader.current_sequence, chunk=chunk)
                except StopAsyncIteration:
                    return
        finally:
            await reader.close()

    return records()


async def stream_events(records: AsyncIterator[ChunkRecord], *, redact: bool = True) -> AsyncIterator[StreamEvent]:
    """Turn live records into wire events, ending with ``end``, ``fail`` or ``truncated``.

    A ``status`` event follows each ``run_paused`` / ``run_resumed`` chunk. With ``redact`` the
    error text of ``error`` chunks and ``fail`` events is what a client may see
    (:func:`~helix_dbos.errors.public_error_message`). The record iterator is closed however the
    iteration ends (a client disconnect cancels it), so its reader detaches from the stream.
    """
    try:
        async for record in records:
            chunk = record.chunk
            if redact and isinstance(chunk, ErrorChunk):
                chunk = chunk.model_copy(update={"error": public_error_message(chunk.error)})
            yield StreamChunkEvent(chunk=chunk, sequence=record.sequence)
            if isinstance(chunk, RunPausedChunk):
                yield StreamStatusEvent(status="paused")
            elif isinstance(chunk, RunResumedChunk):
                yield StreamStatusEvent(status="active")
    except StreamTruncatedError as exc:
        yield StreamTruncatedEvent(
            truncated_at_step=exc.truncated_at_step,
            last_valid_sequence=exc.last_valid_sequence,
            at_sequence=getattr(exc, "at_sequence", None),
        )
        return
    except HelixError as exc:
        yield StreamFailEvent(error=public_error_message(exc) if redact else exc.message, code=exc.code)
        return
    except Exception:
        logger.exception("helix-dbos: reading a stream failed")
        yield StreamFailEvent(error="Internal server error", code="framework_internal_error")
        return
    finally:
        aclose = getattr(records, "aclose", None)
        if aclose is not None:
            # Shielded: a disconnect cancels this generator, and the reader must still detach.
            with anyio.CancelScope(shield=True):
                await aclose()
    yield StreamEndEvent()


async def _sse(events: AsyncIterator[StreamEvent]) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        message = to_sse_message(event)
        yield ServerSentEvent(id=message.id, event=message.event, data=message.data)


def sse_response(
    records: AsyncIterator[ChunkRecord],
    *,
    ping_seconds: float = 15.0,
    send_timeout_seconds: float | None = 30.0,
    headers: Mapping[str, str] | None = None,
    redact: bool = True,
) -> EventSourceResponse:
    """The SSE response over opened records: :func:`stream_events` as server-sent events, with pings."""
    return EventSourceResponse(
        _sse(stream_events(records, redact=redact)),
        ping=ping_seconds,
        send_timeout=send_timeout_seconds,
        headers={**SSE_HEADERS, **(headers or {})},
    )


class ResumableStreamHandler:
    """Serves a stream as SSE from a resume position; one handler serves every stream of an app.

    Give it a ``stream_manager`` read on the app's own event loop, or ``open_records`` when the
    records come from elsewhere (the service opens them on the runtime's loop and maps an unknown
    stream to its own error).
    """

    def __init__(
        self,
        *,
        stream_manager: StreamManager | None = None,
        open_records: RecordOpener | None = None,
        ping_seconds: float = 15.0,
        send_timeout_seconds: float | None = 30.0,
        headers: Mapping[str, str] | None = None,
        redact: bool = True,
    ) -> None:
        """Read from ``stream_manager`` or ``open_records`` (exactly one); ping every ``ping_seconds``."""
        if (stream_manager is None) == (open_records is None):
            raise ValueError("ResumableStreamHandler needs exactly one of stream_manager and open_records")
        if stream_manager is not None:
            manager = stream_manager

            async def opener(stream_id: str, after: int) -> AsyncIterator[ChunkRecord] | None:
                return await records_from_manager(manager, stream_id, after)

            open_records = opener
        assert open_records is not None
        self._open = open_records
        self.ping_seconds = ping_seconds
        self.send_timeout_seconds = send_timeout_seconds
        self.headers = {**SSE_HEADERS, **(headers or {})}
        self.redact = redact

    async def handle(self, stream_id: str, resume_at: int | None = None) -> Response:
        """The SSE response for ``stream_id`` after ``resume_at`` (from the start when ``None``).

        An unknown stream answers 404 with ``{"error": {"code": "state_session_not_found", ...}}``.
        """
        records = await self._open(stream_id, resume_at or 0)
        if records is None:
            return JSONResponse(
                {
                    "error": {
                        "code": "state_session_not_found",
                        "message": f"No stream {stream_id!r}",
                        "retryable": False,
                    }
                },
                status_code=404,
            )
        return self.response(records)

    def response(self, records: AsyncIterator[ChunkRecord]) -> EventSourceResponse:
        """The SSE response over already opened records."""
        return sse_response(
            records,
            ping_seconds=self.ping_seconds,
            send_timeout_seconds=self.send_timeout_seconds,
            headers=self.headers,
            redact=self.redact,
        )

    async def handle_request(self, request: Request, stream_id: str, *, default_position: int = 0) -> Response:
        """Serve ``stream_id`` from the request's ``Last-Event-ID`` header or ``?after=`` query.

        Without either, from ``default_position``. A malformed position answers 400.
        """
        try:
            position = extract_resume_position(request.headers.get("last-event-id"), request.query_params.get("after"))
        except ValueError as exc:
            body: dict[str, Any] = {"error": {"code": "validation_error", "message": str(exc), "retryable": False}}
            return JSONResponse(body, status_code=400)
        return await self.handle(stream_id, default_position if position is None else position)


def create_resumable_stream_handler(
    *,
    stream_manager: StreamManager | None = None,
    open_records: RecordOpener | None = None,
    ping_seconds: float = 15.0,
    send_timeout_seconds: float | None = 30.0,
    headers: Mapping[str, str] | None = None,
    redact: bool = True,
) -> ResumableStreamHandler:
    """The seeds' ``createResumableStreamHandler``: see :class:`ResumableStreamHandler`."""
    return ResumableStreamHandler(
        stream_manager=stream_manager,
        open_records=open_records,
        ping_seconds=ping_seconds,
        send_timeout_seconds=send_timeout_seconds,
        headers=headers,
        redact=redact,
    )
