"""Stream chunk models: JSON round trip of every type, discriminator, type guards, digest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from helix_dbos.stream import chunks as chunks_module
from helix_dbos.stream.chunks import (
    STREAM_CHUNK_TYPES,
    CheckpointCreatedChunk,
    CustomEventChunk,
    ErrorChunk,
    ExecutorSupersededChunk,
    OutputChunk,
    RunInterruptedChunk,
    RunPausedChunk,
    RunResumedChunk,
    StatePatchChunk,
    StepCommittedChunk,
    StepDiscardedChunk,
    StreamChunk,
    StreamChunkAdapter,
    StreamResyncChunk,
    SubAgentEndChunk,
    SubAgentStartChunk,
    TextDeltaChunk,
    ThinkingChunk,
    ToolApprovalRequestChunk,
    ToolEndChunk,
    ToolStartChunk,
    canonical_arguments_digest,
    chunk_from_json,
    chunk_to_json,
)

BASE: dict[str, Any] = {
    "agent_id": "session-1",
    "agent_type": "researcher",
    "step": 3,
    "timestamp": 1_700_000,
}

# One fully populated example per chunk type: non-default values everywhere, so a field the
# serialiser dropped or renamed would change the round-tripped chunk.
EXAMPLES: list[StreamChunk] = [
    TextDeltaChunk(**BASE, content="Hello, wörld"),
    ThinkingChunk(**BASE, content="Let me think", is_complete=True),
    ToolStartChunk(**BASE, tool_call_id="call-1", tool_name="search", arguments={"q": "dbos", "n": 2}),
    ToolEndChunk(**BASE, tool_call_id="call-1", tool_name="search", result=None, error="boom", success=False),
    ToolApprovalRequestChunk(
        **BASE,
        tool_call_id="call-2",
        tool_name="delete_file",
        arguments={"path": "/tmp/x"},
        arguments_digest=canonical_arguments_digest({"path": "/tmp/x"}),
        deadline=1_700_500,
    ),
    SubAgentStartChunk(
        **BASE, sub_agent_id="child-1", sub_agent_type="summariser", tool_call_id="call-3", input={"x": 1}
    ),
    SubAgentEndChunk(
        **BASE,
        sub_agent_id="child-1",
        sub_agent_type="summariser",
        tool_call_id="call-3",
        result={"summary": "ok"},
        error=None,
    ),
    CustomEventChunk(**BASE, event_name="progress", data={"pct": 50, "items": [1, 2.5, None, True]}),
    StatePatchChunk(**BASE, patches=[{"op": "replace", "path": "/count", "value": 2}]),
    ErrorChunk(**BASE, error="rate limited", code="provider_rate_limited", recoverable=True),
    OutputChunk(**BASE, output=None),
    RunInterruptedChunk(**BASE, reason="user"),
    RunResumedChunk(**BASE, run_id="run-2", previous_run_id="run-1"),
    RunPausedChunk(**BASE, reason="approval", pending_tool_call_ids=["call-2"]),
    CheckpointCreatedChunk(**BASE, checkpoint_id="cp-1", step_count=3),
    ExecutorSupersededChunk(**BASE),
    StepCommittedChunk(**BASE, step_count=3),
    StepDiscardedChunk(**BASE, step_count=4, reason="crash"),
    StreamResyncChunk(**BASE, checkpoint_id="cp-1", step_count=3, message_count=7, from_sequence=42, reason="rollback"),
]


def test_examples_cover_every_chunk_type_once() -> None:
    tested = [chunk.type for chunk in EXAMPLES]
    assert len(tested) == len(set(tested))
    assert set(tested) == STREAM_CHUNK_TYPES
    assert len(STREAM_CHUNK_TYPES) == 19


@pytest.mark.parametrize("chunk", EXAMPLES, ids=lambda chunk: chunk.type)
def test_json_round_trip_through_the_adapter(chunk: StreamChunk) -> None:
    text = chunk_to_json(chunk)
    data = json.loads(text)
    assert data["type"] == chunk.type
    assert data["agent_id"] == "session-1"
    assert data["step"] == 3

    restored = chunk_from_json(text)
    assert type(restored) is type(chunk)
    assert restored == chunk
    # The adapter is the one path: bytes and python-mode validation agree with the helpers.
    assert StreamChunkAdapter.validate_json(StreamChunkAdapter.dump_json(chunk)) == chunk
    assert StreamChunkAdapter.validate_python(StreamChunkAdapter.dump_python(chunk, mode="json")) == chunk


def test_output_chunk_keeps_a_none_output_required() -> None:
    # ``output`` is required; dumping must keep an explicit null or the chunk would not parse back.
    assert json.loads(chunk_to_json(OutputChunk(agent_id="a", agent_type="t", output=None)))["output"] is None
    with pytest.raises(ValidationError):
        chunk_from_json('{"type": "output", "agent_id": "a", "agent_type": "t"}')


def test_discriminator_picks_the_class_from_plain_json() -> None:
    chunk = chunk_from_json('{"type": "thinking", "agent_id": "a", "agent_type": "t", "content": "hm"}')
    assert isinstance(chunk, ThinkingChunk)
    assert chunk.is_complete is False
    assert chunk.step is None
    assert chunk.timestamp is None


@pytest.mark.parametrize(
    "payload",
    [
        '{"type": "nope", "agent_id": "a", "agent_type": "t"}',
        '{"agent_id": "a", "agent_type": "t", "content": "x"}',
        '{"type": "text_delta", "agent_id": "a", "agent_type": "t", "content": "x", "extra": 1}',
        '{"type": "text_delta", "agent_type": "t", "content": "x"}',
        '{"type": "stream_resync", "agent_id": "a", "agent_type": "t", "checkpoint_id": "c", '
        '"step_count": 1, "message_count": 1, "from_sequence": 1, "reason": "whim"}',
    ],
    ids=["unknown-type", "missing-type", "extra-field", "missing-agent-id", "bad-resync-reason"],
)
def test_invalid_chunks_are_rejected(payload: str) -> None:
    with pytest.raises(ValidationError):
        chunk_from_json(payload)


def test_type_field_defaults_and_dumps_first() -> None:
    chunk = TextDeltaChunk(agent_id="a", agent_type="t", content="x")
    assert chunk.type == "text_delta"
    assert next(iter(json.loads(chunk_to_json(chunk)))) == "type"


def test_run_paused_pending_ids_default_is_not_shared() -> None:
    first = RunPausedChunk(agent_id="a", agent_type="t")
    second = RunPausedChunk(agent_id="a", agent_type="t")
    first.pending_tool_call_ids.append("x")
    assert second.pending_tool_call_ids == []


GUARDS: dict[str, Callable[[object], bool]] = {
    "text_delta": chunks_module.is_text_delta_chunk,
    "thinking": chunks_module.is_thinking_chunk,
    "tool_start": chunks_module.is_tool_start_chunk,
    "tool_end": chunks_module.is_tool_end_chunk,
    "tool_approval_request": chunks_module.is_tool_approval_request_chunk,
    "subagent_start": chunks_module.is_sub_agent_start_chunk,
    "subagent_end": chunks_module.is_sub_agent_end_chunk,
    "custom": chunks_module.is_custom_event_chunk,
    "state_patch": chunks_module.is_state_patch_chunk,
    "error": chunks_module.is_error_chunk,
    "output": chunks_module.is_output_chunk,
    "run_interrupted": chunks_module.is_run_interrupted_chunk,
    "run_resumed": chunks_module.is_run_resumed_chunk,
    "run_paused": chunks_module.is_run_paused_chunk,
    "checkpoint_created": chunks_module.is_checkpoint_created_chunk,
    "executor_superseded": chunks_module.is_executor_superseded_chunk,
    "step_committed": chunks_module.is_step_committed_chunk,
    "step_discarded": chunks_module.is_step_discarded_chunk,
    "stream_resync": chunks_module.is_stream_resync_chunk,
}


def test_every_type_has_a_guard() -> None:
    assert set(GUARDS) == STREAM_CHUNK_TYPES


@pytest.mark.parametrize("chunk_type", sorted(GUARDS))
def test_each_guard_accepts_exactly_its_own_type(chunk_type: str) -> None:
    guard = GUARDS[chunk_type]
    matches = [chunk.type for chunk in EXAMPLES if guard(chunk)]
    assert matches == [chunk_type]
    assert guard({"type": chunk_type}) is False  # a plain dict is not a chunk


def test_every_chunk_class_forbids_extra_fields() -> None:
    for chunk in EXAMPLES:
        model: type[BaseModel] = type(chunk)
        assert model.model_config.get("extra") == "forbid", model.__name__


def test_canonical_digest_ignores_key_order_and_whitespace() -> None:
    args = {"b": [1, {"y": 2, "x": "é"}], "a": None}
    expected = hashlib.sha256('{"a":null,"b":[1,{"x":"é","y":2}]}'.encode()).hexdigest()
    assert canonical_arguments_digest(args) == expected
    reordered = json.loads('{ "a" : null, "b": [1, {"x": "é", "y": 2}] }')
    assert canonical_arguments_digest(reordered) == expected


def test_canonical_digest_changes_with_any_value() -> None:
    assert canonical_arguments_digest({"path": "/tmp/x"}) != canonical_arguments_digest({"path": "/tmp/y"})
    assert canonical_arguments_digest({"n": 1}) != canonical_arguments_digest({"n": "1"})
    assert canonical_arguments_digest({"items": [1, 2]}) != canonical_arguments_digest({"items": [2, 1]})
