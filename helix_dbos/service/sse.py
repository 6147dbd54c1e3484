"""Server-sent events for a session's stream: the seeds' ``StreamEvent`` wire union over SSE.

Each stored chunk is one event whose SSE ``id`` is its stream sequence, so a client that
reconnects with ``Last-Event-ID`` gets every later chunk exactly once (sequences are never reused,
not even after chunks were removed). The control events carry no ``id``: a reconnecting client
resumes after the last *chunk* it saw.

=============  ==================================================================================
``event``      ``data``
=============  ==================================================================================
``chunk``      the chunk's JSON (``helix_dbos.stream.chunks``), ``id: <sequence>``
``status``     ``{"type": "status", "status": "paused" | "active"}`` after ``run_paused`` /
               ``run_resumed`` chunks
``end``        ``{"type": "end"}``: the stream ended (the run completed); the response ends
``fail``       ``{"type": "fail", "error": "...", "code": "..."}``: the stream failed; the
               response ends (``error`` is safe to show: no SQL, parameters or hosts)
``truncated``  ``{"type": "truncated", "truncatedAtStep": n, "lastValidSequence": s}``: chunks
               after ``s`` that this client had not read were removed (crash recovery); reconnect
               with ``Last-Event-ID: s`` to read the surviving ones
=============  ==================================================================================

Comment lines (``: ping ...``) keep idle connections open through proxies. Error text (``fail``
events, ``error`` chunks) goes through :func:`~helix_dbos.errors.public_error_message` on its way
out: what a database driver wrote stays in the server's logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent

from helix_dbos.errors import HelixError, StreamTruncatedError, public_error_message
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.streaming import RunStreams
from helix_dbos.stream.base import ChunkRecord, StreamInfo
from helix_dbos.stream.chunks import ErrorChunk, RunPausedChunk, RunResumedChunk, chunk_to_json

logger = logging.getLogger("helix_dbos.service")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""Keep proxies (nginx) from buffering or caching the stream."""

LAST_EVENT_ID_PATTERN = r"^[0-9]{1,18}$"
"""A ``Last-Event-ID`` this service accepts: a stream sequence it sent as an event ``id``."""


def _control(event: str, **data: Any) -> ServerSentEvent:
    return ServerSentEvent(event=event, data=json.dumps({"type": event, **data}, separators=(",", ":")))


def chunk_event(record: ChunkRecord) -> ServerSentEvent:
    """One chunk as an SSE event, identified by its stream sequence."""
    chunk = record.chunk
    if isinstance(chunk, ErrorChunk):
        chunk = chunk.model_copy(update={"error": public_error_message(chunk.error)})
    return ServerSentEvent(id=str(record.sequence), event="chunk", data=chunk_to_json(chunk))


async def stream_events(records: AsyncIterator[ChunkRecord]) -> AsyncIterator[ServerSentEvent]:
    """Turn a live record iterator into SSE events, ending with ``end``, ``fail`` or ``truncated``.

    The record iterator is closed however the response ends (a client disconnect cancels this
    generator), so the reader detaches from the stream.
    """
    try:
        async for record in records:
            yield chunk_event(record)
            if isinstance(record.chunk, RunPausedChunk):
                yield _control("status", status="paused")
            elif isinstance(record.chunk, RunResumedChunk):
                yield _control("status", status="active")
    except StreamTruncatedError as exc:
        yield _control("truncated", truncatedAtStep=exc.truncated_at_step, lastValidSequence=exc.last_valid_sequence)
        return
    except HelixError as exc:
        yield _control("fail", error=public_error_message(exc), code=exc.code)
        return
    except Exception:
        logger.exception("helix-dbos service: reading a stream failed")
        yield _control("fail", error="Internal server error", code="framework_internal_error")
        return
    finally:
        aclose = getattr(records, "aclose", None)
        if aclose is not None:
            # Shielded: a disconnect cancels this generator, and the reader must still detach.
            with anyio.CancelScope(shield=True):
                await aclose()
    yield _control("end")


def event_source(
    records: AsyncIterator[ChunkRecord], *, ping_seconds: float, send_timeout_seconds: float | None
) -> EventSourceResponse:
    """The SSE response for a session stream."""
    return EventSourceResponse(
        stream_events(records),
        ping=ping_seconds,
        send_timeout=send_timeout_seconds,
        headers=SSE_HEADERS,
    )


def parse_after(last_event_id: str | None, after: int | None) -> int | None:
    """The sequence to resume after: ``Last-Event-ID`` wins over ``?after=``.

    Browsers' ``EventSource`` reconnects to the same URL (``?after=`` included) with the id of the
    last event it saw, so the header is the newer position. Returns ``None`` when neither is given;
    the route has already checked the header against :data:`LAST_EVENT_ID_PATTERN`.
    """
    if last_event_id is not None and last_event_id.strip():
        return int(last_event_id.strip())
    return after


async def stream_info(streams: RunStreams, stream_id: str) -> StreamInfo | None:
    """The stream's status and latest sequence, asked on the runtime's loop (where managers live)."""
    future = asyncio.run_coroutine_threadsafe(streams.manager.get_stream_info(stream_id), background_loop.loop)
    return await asyncio.wrap_future(future)


__all__ = [
    "LAST_EVENT_ID_PATTERN",
    "SSE_HEADERS",
    "chunk_event",
    "event_source",
    "parse_after",
    "stream_events",
    "stream_info",
]
