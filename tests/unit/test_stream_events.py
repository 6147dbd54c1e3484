"""The wire ``StreamEvent`` union: models, parse/serialize, the SSE encoding and the service's bytes.

The byte strings below are what ``helix_dbos/service/sse.py`` wrote before the models existed
(``json.dumps(..., separators=(",", ":"))``): clients written against that format keep working.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import ErrorChunk, StatePatchChunk, TextDeltaChunk, chunk_to_json
from helix_dbos.stream.events import (
    STREAM_EVENT_TYPES,
    SSEMessage,
    StreamChunkEvent,
    StreamEndEvent,
    StreamEvent,
    StreamEventAdapter,
    StreamFailEvent,
    StreamStatusEvent,
    StreamTruncatedEvent,
    chunk_event_from_record,
    is_stream_chunk_event,
    is_stream_end_event,
    is_stream_fail_event,
    is_stream_truncated_event,
    parse_named_sse_event,
    parse_stream_event,
    serialize_stream_event,
    to_sse_message,
)

TEXT = TextDeltaChunk(agent_id="s1", agent_type="writer", content="Hi", step=1)


# --------------------------------------------------------------------------- the service's bytes


@pytest.mark.parametrize(
    ("event", "data"),
    [
        (StreamEndEvent(), '{"type":"end"}'),
        (StreamStatusEvent(status="paused"), '{"type":"status","status":"paused"}'),
        (StreamStatusEvent(status="active"), '{"type":"status","status":"active"}'),
        (
            StreamFailEvent(error="Internal server error", code="framework_internal_error"),
            '{"type":"fail","error":"Internal server error","code":"framework_internal_error"}',
        ),
        (StreamFailEvent(error="caf\u00e9"), '{"type":"fail","error":"caf\\u00e9"}'),
        (
            StreamTruncatedEvent(truncated_at_step=2, last_valid_sequence=7),
            '{"type":"truncated","truncatedAtStep":2,"lastValidSequence":7}',
        ),
        (
            StreamTruncatedEvent(truncated_at_step=2, last_valid_sequence=7, at_sequence=9),
            '{"type":"truncated","truncatedAtStep":2,"lastValidSequence":7,"atSequence":9}',
        ),
    ],
)
def test_control_events_keep_the_service_wire_bytes(event: StreamEvent, data: str) -> None:
    message = to_sse_message(event)
    assert message == SSEMessage(event=event.type, data=data, id=None)
    assert serialize_stream_event(event) == data
    assert parse_stream_event(data, event=event.type) == event
    assert parse_stream_event(data) == event


def test_a_chunk_event_over_sse_is_the_chunk_json_with_its_sequence_as_id() -> None:
    event = chunk_event_from_record(ChunkRecord(sequence=42, chunk=TEXT))
    message = to_sse_message(event)
    assert message == SSEMessage(event="chunk", data=chunk_to_json(TEXT), id="42")
    assert parse_stream_event(message.data, event=message.event, id=message.id) == event
    assert message.encode() == f"id: 42\r\nevent: chunk\r\ndata: {chunk_to_json(TEXT)}\r\n\r\n"


def test_a_chunk_event_envelope_nests_the_chunk() -> None:
    event = StreamChunkEvent(chunk=TEXT, sequence=3)
    text = serialize_stream_event(event)
    assert json.loads(text) == {"type": "chunk", "chunk": json.loads(chunk_to_json(TEXT)), "sequence": 3}
    assert parse_stream_event(text) == event
    assert parse_stream_event(serialize_stream_event(StreamChunkEvent(chunk=TEXT)), id="5").sequence == 5


def test_the_seeds_at_sequence_is_read_from_camel_case_and_optional() -> None:
    event = parse_stream_event('{"type":"truncated","truncatedAtStep":3,"atSequence":11}')
    assert isinstance(event, StreamTruncatedEvent)
    assert (event.truncated_at_step, event.at_sequence, event.last_valid_sequence) == (3, 11, None)
    assert StreamTruncatedEvent(truncatedAtStep=1).at_sequence is None  # type: ignore[call-arg]


def test_unknown_fields_of_a_control_event_are_ignored_but_chunks_stay_strict() -> None:
    assert parse_stream_event('{"type":"end","output":{"answer":1}}', event="end") == StreamEndEvent()
    with pytest.raises(ValidationError):
        parse_stream_event('{"type":"text_delta","agent_id":"a","agent_type":"b","content":"x","typo":1}', "chunk")


@pytest.mark.parametrize(
    ("data", "event", "id_"),
    [
        ("{}", None, None),  # no type
        ('{"type":"nope"}', None, None),
        ('{"type":"status","status":"done"}', "status", None),
        ('{"type":"end"}', "fail", None),  # the name and the data disagree
        ("[1]", "end", None),
        ("not json", "end", None),
        ('{"type":"end"}', "unknown-event", None),
        (chunk_to_json(TEXT), "chunk", "abc"),
        ('{"type":"truncated"}', "truncated", None),  # truncatedAtStep is required
    ],
)
def test_bad_input_raises_value_error(data: str, event: str | None, id_: str | None) -> None:
    with pytest.raises(ValueError):
        parse_stream_event(data, event=event, id=id_)


def test_an_event_name_alone_fills_in_the_type() -> None:
    assert parse_named_sse_event("status", '{"status":"paused"}') == StreamStatusEvent(status="paused")


def test_guards_narrow_each_kind() -> None:
    events: list[StreamEvent] = [
        StreamChunkEvent(chunk=TEXT),
        StreamEndEvent(),
        StreamFailEvent(error="x"),
        StreamStatusEvent(status="active"),
        StreamTruncatedEvent(truncated_at_step=0),
    ]
    guards = [is_stream_chunk_event, is_stream_end_event, is_stream_fail_event, is_stream_truncated_event]
    table = [[guard(event) for guard in guards] for event in events]
    assert table == [
        [True, False, False, False],
        [False, True, False, False],
        [False, False, True, False],
        [False, False, False, False],  # the seeds have no status guard
        [False, False, False, True],
    ]
    assert sorted(STREAM_EVENT_TYPES) == sorted(e.type for e in events)


def test_events_are_immutable() -> None:
    with pytest.raises(ValidationError):
        StreamEndEvent().type = "fail"  # type: ignore[misc]


# --------------------------------------------------------------------------- round trips

_text = st.text(max_size=20)
_seq = st.integers(min_value=0, max_value=10**18 - 1)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_chunks = st.one_of(
    st.builds(TextDeltaChunk, agent_id=_text, agent_type=_text, content=_text, step=st.none() | _seq),
    st.builds(
        StatePatchChunk,
        agent_id=_text,
        agent_type=_text,
        patches=st.lists(st.fixed_dictionaries({"op": st.just("add"), "path": _text, "value": _json}), max_size=3),
    ),
    st.builds(ErrorChunk, agent_id=_text, agent_type=_text, error=_text, code=st.none() | _text),
)
_events: st.SearchStrategy[Any] = st.one_of(
    st.builds(StreamChunkEvent, chunk=_chunks, sequence=st.none() | _seq),
    st.just(StreamEndEvent()),
    st.builds(StreamFailEvent, error=_text, code=st.none() | _text),
    st.builds(StreamStatusEvent, status=st.sampled_from(["paused", "active"])),
    st.builds(
        StreamTruncatedEvent,
        truncated_at_step=_seq,
        last_valid_sequence=st.none() | _seq,
        at_sequence=st.none() | _seq,
    ),
)


@settings(max_examples=300, deadline=None)
@given(_events)
def test_every_event_round_trips_through_the_envelope_and_sse(event: Any) -> None:
    assert parse_stream_event(serialize_stream_event(event)) == event
    message = to_sse_message(event)
    assert parse_stream_event(message.data, event=message.event, id=message.id) == event
    assert StreamEventAdapter.validate_json(serialize_stream_event(event)) == event


@settings(max_examples=100, deadline=None)
@given(_events)
def test_the_encoded_sse_text_parses_back(event: Any) -> None:
    """What a line-based SSE reader makes of ``SSEMessage.encode`` is the event again."""
    text = to_sse_message(event).encode()
    fields: dict[str, list[str]] = {}
    for line in text.split("\r\n"):
        if line:
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))
    data = "\n".join(fields["data"])
    parsed = parse_stream_event(data, event=fields["event"][-1], id=(fields.get("id") or [None])[-1])
    assert parsed == event
