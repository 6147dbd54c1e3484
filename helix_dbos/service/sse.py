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
``truncated``  ``{"type": "truncated", "truncatedAtStep": n, "lastValidSequence": s, "atSequence": h}``:
               chunks after ``s`` that this client had not read were removed (crash recovery);
               reconnect with ``Last-Event-ID: s`` to read the surviving ones (``h``: the stream's
               high-water mark at the cleanup, the seeds' ``atSequence``)
=============  ==================================================================================

The events are the models of :mod:`helix_dbos.stream.events` and the response is the
:class:`~helix_dbos.stream.resumable.ResumableStreamHandler` any ASGI app can use, so what this
service writes is what :func:`~helix_dbos.stream.events.parse_stream_event` reads. Comment lines
(``: ping ...``) keep idle connections open through proxies. Error text (``fail`` events, ``error``
chunks) goes through :func:`~helix_dbos.errors.public_error_message` on its way out: what a
database driver wrote stays in the server's logs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent

from helix_dbos.errors import HelixError, StreamTruncatedError, public_error_message
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.streaming import RunStreams
from helix_dbos.stream.base import ChunkRecord, StreamInfo
from helix_dbos.stream.chunks import ErrorChunk
from helix_dbos.stream.events import StreamChunkEvent, to_sse_message
from helix_dbos.stream.resumable import LAST_EVENT_ID_PATTERN, SSE_HEADERS, extract_resume_position, sse_response
from helix_dbos.stream.resumable import stream_events as wire_events

logger = logging.getLogger("helix_dbos.service")


def chunk_event(record: ChunkRecord) -> ServerSentEvent:
    """One chunk as an SSE event, identified by its stream sequence (error text made safe to show)."""
    chunk = record.chunk
    if isinstance(chunk, ErrorChunk):
        chunk = chunk.model_copy(update={"error": public_error_message(chunk.error)})
    message = to_sse_message(StreamChunkEvent(chunk=chunk, sequence=record.sequence))
    return ServerSentEvent(id=message.id, event=message.event, data=message.data)


async def stream_events(records: AsyncIterator[ChunkRecord]) -> AsyncIterator[ServerSentEvent]:
    """Turn a live record iterator into SSE events, ending with ``end``, ``fail`` or ``truncated``."""
    async for event in wire_events(records):
        message = to_sse_message(event)
        yield ServerSentEvent(id=message.id, event=message.event, data=message.data)


def event_source(
    records: AsyncIterator[ChunkRecord], *, ping_seconds: float, send_timeout_seconds: float | None
) -> EventSourceResponse:
    """The SSE response for a session stream: the resumable handler's response."""
    return sse_response(records, ping_seconds=ping_seconds, send_timeout_seconds=send_timeout_seconds)


def parse_after(last_event_id: str | None, after: int | None) -> int | None:
    """The sequence to resume after: ``Last-Event-ID`` wins over ``?after=``.

    Browsers' ``EventSource`` reconnects to the same URL (``?after=`` included) with the id of the
    last event it saw, so the header is the newer position. Returns ``None`` when neither is given;
    the route has already checked the header against :data:`LAST_EVENT_ID_PATTERN`.
    """
    return extract_resume_position(last_event_id, after)


async def stream_info(streams: RunStreams, stream_id: str) -> StreamInfo | None:
    """The stream's status and latest sequence, asked on the runtime's loop (where managers live)."""
    future = asyncio.run_coroutine_threadsafe(streams.manager.get_stream_info(stream_id), background_loop.loop)
    return await asyncio.wrap_future(future)


async def is_latest_chunk(streams: RunStreams, stream_id: str, sequence: int) -> bool:
    """Whether nothing was written after ``sequence``: a pause there still holds the run.

    The chat protocols end a reply at a pause or an interrupt only while it is the stream's latest
    chunk, so a replay passes over a pause the client has answered since.
    """
    info = await stream_info(streams, stream_id)
    return info is None or info.latest_sequence <= sequence


async def detach_reader(records: AsyncIterator[ChunkRecord]) -> None:
    """Close a live record iterator, even while the response that read it is being cancelled.

    Shielded: a client's disconnect cancels the generator reading the stream, and the reader must
    still detach from the stream manager (else it keeps polling for a response nobody reads).
    """
    aclose = getattr(records, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


def read_failure(exc: Exception, reply: str) -> tuple[str, str | None]:
    """What a chat protocol's stream tells its client when reading the run's stream failed.

    A message safe to show (no SQL, parameters or hosts) and the error's code when it has one.
    Truncation (crash recovery removed chunks this reader was on) asks for a reconnect, which reads
    the surviving chunks; anything unexpected is logged here and shown only as an internal error.
    ``reply`` names what the protocol calls the response (``"reply"``, ``"run"``).
    """
    if isinstance(exc, StreamTruncatedError):
        return f"Part of this {reply} was removed by crash recovery: reconnect to read it again", None
    if isinstance(exc, HelixError):
        return public_error_message(exc), exc.code
    logger.exception("helix-dbos service: reading the stream of a %s failed", reply)
    return "Internal server error", None


__all__ = [
    "LAST_EVENT_ID_PATTERN",
    "SSE_HEADERS",
    "chunk_event",
    "detach_reader",
    "event_source",
    "is_latest_chunk",
    "parse_after",
    "read_failure",
    "stream_events",
    "stream_info",
]
