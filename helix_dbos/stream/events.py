"""The stream's wire format: the seeds' ``StreamEvent`` union (002 "Stream Event Wire Types").

A reader of a session stream sees more than chunks: the stream ends, fails, pauses for the client,
or loses chunks to crash recovery. These five events are what crosses a transport (SSE, a WebSocket,
a pub-sub channel); the service writes them and :mod:`helix_dbos.client` parses them with the same
models, so the two cannot drift::

    event = StreamTruncatedEvent(truncated_at_step=2, last_valid_sequence=7, at_sequence=9)
    assert parse_stream_event(serialize_stream_event(event)) == event

=============  ======================================================================================
``type``       fields (JSON names on the wire are the seeds' camelCase)
=============  ======================================================================================
``chunk``      ``chunk`` (a :data:`~helix_dbos.stream.chunks.StreamChunk`), ``sequence`` (its stream
               sequence: the SSE ``id`` a client resumes after)
``end``        none: the stream ended (the run completed); nothing follows
``fail``       ``error`` (safe to show), ``code`` (the ``HelixError`` code): the stream failed
``status``     ``status``: ``paused`` (waiting for the client) or ``active`` again
``truncated``  ``truncatedAtStep``, ``atSequence`` (the stream's high-water mark at the cleanup),
               ``lastValidSequence`` (the last chunk this reader got: resume after it)
=============  ======================================================================================

Two encodings, one model:

- **Envelope** (:func:`serialize_stream_event`): the event as one JSON object, ``{"type": ...}``;
  a chunk event nests its chunk: ``{"type": "chunk", "chunk": {...}, "sequence": 3}``. For
  transports without named events (WebSocket, pub-sub).
- **SSE** (:func:`to_sse_message`): the ``type`` is the SSE ``event`` name; a chunk event's ``data``
  is the chunk's own JSON and its ``id`` the sequence, so a browser ``EventSource`` resumes with
  ``Last-Event-ID`` by itself. The control events' ``data`` is their envelope and they carry no
  ``id``: a reconnecting client resumes after the last *chunk* it saw.

:func:`parse_stream_event` reads both: give it the SSE ``data`` with the ``event`` and ``id`` fields
of the message, or an envelope alone.

Unknown fields of a control event are ignored when parsing (a newer server may add some); chunks
stay strict (:mod:`helix_dbos.stream.chunks`). Beyond the seeds: ``fail`` carries ``code``, and
``truncated`` carries ``lastValidSequence`` (helix-dbos's wire had it before ``atSequence``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import StreamChunk, chunk_from_json, chunk_to_json

__all__ = [
    "STREAM_EVENT_TYPES",
    "SSEMessage",
    "StreamChunkEvent",
    "StreamEndEvent",
    "StreamEvent",
    "StreamEventAdapter",
    "StreamFailEvent",
    "StreamStatusEvent",
    "StreamTruncatedEvent",
    "chunk_event_from_record",
    "is_stream_chunk_event",
    "is_stream_end_event",
    "is_stream_fail_event",
    "is_stream_truncated_event",
    "parse_named_sse_event",
    "parse_stream_event",
    "serialize_stream_event",
    "to_sse_message",
]


class _ControlEvent(BaseModel):
    """A control event: camelCase on the wire (the seeds' names), snake_case in Python."""

    # ``ignore``: a client must keep reading when a newer server adds a field to a control event.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class StreamChunkEvent(BaseModel):
    """A stored chunk, with the stream sequence a client resumes after."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["chunk"] = "chunk"
    chunk: StreamChunk
    """The chunk (``text_delta``, ``tool_start``, ``state_patch``, ...)."""
    sequence: int | None = None
    """Its stream sequence (the SSE ``id``); ``None`` when the transport did not carry one."""


class StreamEndEvent(_ControlEvent):
    """The stream ended: the run completed and every chunk was delivered. Nothing follows."""

    type: Literal["end"] = "end"


class StreamFailEvent(_ControlEvent):
    """The stream failed; the reader stops. ``error`` is safe to show (no SQL, parameters or hosts)."""

    type: Literal["fail"] = "fail"
    error: str
    """Human-readable message."""
    code: str | None = None
    """The ``HelixError`` code (``transport_error``, ...), when the failure had one."""


class StreamStatusEvent(_ControlEvent):
    """The run paused (waiting for tool results or an approval) or became active again.

    The seeds have no ``is_*`` guard for it: narrow with ``isinstance`` or ``event.type == "status"``.
    """

    type: Literal["status"] = "status"
    status: Literal["paused", "active"]


class StreamTruncatedEvent(_ControlEvent):
    """Chunks this reader had not read were removed (crash recovery: ``cleanup_to_step``).

    The chunks of steps after ``truncated_at_step`` are gone and will be written again by the
    recovered run; reconnect after ``last_valid_sequence`` (``Last-Event-ID``) to read what
    survived and what follows, and drop anything derived from chunks after it.
    """

    type: Literal["truncated"] = "truncated"
    truncated_at_step: int = Field(alias="truncatedAtStep")
    """The step count passed to ``cleanup_to_step``: chunks with ``step > truncated_at_step`` were removed."""
    last_valid_sequence: int | None = Field(default=None, alias="lastValidSequence")
    """The last sequence this reader received before the truncation: resume after it."""
    at_sequence: int | None = Field(default=None, alias="atSequence")
    """The stream's sequence high-water mark at the cleanup (seeds: readers gate on
    ``at_sequence > last_yielded_sequence``); ``None`` when the stream did not record it."""


StreamEvent = Annotated[
    StreamChunkEvent | StreamEndEvent | StreamFailEvent | StreamStatusEvent | StreamTruncatedEvent,
    Field(discriminator="type"),
]
"""Any event of a stream's wire format, discriminated by ``type`` (the seeds' ``StreamEvent``)."""

StreamEventAdapter: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)
"""Validates and serialises any :data:`StreamEvent` (the seeds' ``StreamEventSchema``)."""

STREAM_EVENT_TYPES: tuple[str, ...] = ("chunk", "end", "fail", "status", "truncated")
"""Every event ``type``, which is also its SSE ``event`` name."""


@dataclass(frozen=True)
class SSEMessage:
    """One server-sent event's fields: what :func:`to_sse_message` writes and a client reads back."""

    event: str
    data: str
    id: str | None = None

    def encode(self) -> str:
        """The event as ``text/event-stream`` text (``id:``, ``event:``, one ``data:`` per line, blank line)."""
        lines = [] if self.id is None else [f"id: {self.id}"]
        lines.append(f"event: {self.event}")
        lines.extend(f"data: {line}" for line in self.data.split("\n"))
        return "\r\n".join(lines) + "\r\n\r\n"


def _control_json(event: _ControlEvent) -> str:
    # json.dumps (ASCII escapes, compact) keeps the service's bytes what they were before the models.
    return json.dumps(event.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))


def serialize_stream_event(event: StreamEvent) -> str:
    """The event as one JSON envelope (``{"type": ...}``): for transports without SSE event names."""
    if isinstance(event, StreamChunkEvent):
        sequence = "" if event.sequence is None else f',"sequence":{event.sequence}'
        return f'{{"type":"chunk","chunk":{chunk_to_json(event.chunk)}{sequence}}}'
    return _control_json(event)


def to_sse_message(event: StreamEvent) -> SSEMessage:
    """The event's SSE fields: ``event`` = its type; a chunk's ``data`` is the chunk JSON, ``id`` its sequence."""
    if isinstance(event, StreamChunkEvent):
        sequence = None if event.sequence is None else str(event.sequence)
        return SSEMessage(event="chunk", data=chunk_to_json(event.chunk), id=sequence)
    return SSEMessage(event=event.type, data=_control_json(event))


def parse_stream_event(data: str | bytes, event: str | None = None, id: str | None = None) -> StreamEvent:
    """Parse one event from its SSE fields (``data``, ``event``, ``id``) or from an envelope alone.

    With ``event`` ``"chunk"``, ``data`` is the chunk's JSON and ``id`` its sequence (what the
    service sends). With another event name, ``data`` is that event's envelope. Without ``event``
    (or the SSE default, ``"message"``), ``data`` is an envelope of any type. Raises ``ValueError``
    (pydantic's ``ValidationError`` is one) on an unknown event name or invalid data, so one
    ``except ValueError`` covers every bad input.
    """
    if event == "chunk":
        sequence = None
        if id is not None and id.strip():
            sequence = int(id.strip())
        return StreamChunkEvent(chunk=chunk_from_json(data), sequence=sequence)
    if event is None or event == "message":
        parsed = StreamEventAdapter.validate_json(data)
        if isinstance(parsed, StreamChunkEvent) and parsed.sequence is None and id is not None and id.strip():
            parsed = parsed.model_copy(update={"sequence": int(id.strip())})
        return parsed
    if event not in STREAM_EVENT_TYPES:
        raise ValueError(f"Unknown stream event {event!r}; expected one of {', '.join(STREAM_EVENT_TYPES)}")
    payload: Any = json.loads(data)
    if not isinstance(payload, dict):
        raise ValueError(f"The data of a {event!r} event must be a JSON object")
    if payload.setdefault("type", event) != event:
        raise ValueError(f"A {event!r} event carries data of type {payload['type']!r}")
    return StreamEventAdapter.validate_python(payload)


def parse_named_sse_event(event: str, data: str | bytes, id: str | None = None) -> StreamEvent:
    """The seeds' ``parseNamedSSEEvent``: :func:`parse_stream_event` with the SSE event name required."""
    return parse_stream_event(data, event=event, id=id)


def chunk_event_from_record(record: ChunkRecord) -> StreamChunkEvent:
    """A stored chunk as its wire event."""
    return StreamChunkEvent(chunk=record.chunk, sequence=record.sequence)


def is_stream_chunk_event(event: StreamEvent) -> TypeGuard[StreamChunkEvent]:
    """Whether ``event`` carries a chunk."""
    return isinstance(event, StreamChunkEvent)


def is_stream_end_event(event: StreamEvent) -> TypeGuard[StreamEndEvent]:
    """Whether ``event`` ends the stream."""
    return isinstance(event, StreamEndEvent)


def is_stream_fail_event(event: StreamEvent) -> TypeGuard[StreamFailEvent]:
    """Whether ``event`` is the stream's failure."""
    return isinstance(event, StreamFailEvent)


def is_stream_truncated_event(event: StreamEvent) -> TypeGuard[StreamTruncatedEvent]:
    """Whether ``event`` reports removed chunks (reconnect after ``last_valid_sequence``)."""
    return isinstance(event, StreamTruncatedEvent)
