"""Where a dead model attempt's deltas start, from a stream's records (pure)."""

from __future__ import annotations

from helix_dbos.runtime.attempt_resync import dead_attempt_start
from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import StreamChunk, StreamResyncChunk, TextDeltaChunk, ToolStartChunk


def _delta(run_id: str, step: int, text: str) -> TextDeltaChunk:
    return TextDeltaChunk(agent_id=run_id, agent_type="a", step=step, content=text)


def _resync(run_id: str, step: int, at: int) -> StreamResyncChunk:
    return StreamResyncChunk(
        agent_id=run_id,
        agent_type="a",
        step=step,
        checkpoint_id="cp",
        step_count=step - 1,
        message_count=1,
        from_sequence=at,
        reason="crash_recovery",
    )


def _records(*chunks: StreamChunk) -> list[ChunkRecord]:
    return [ChunkRecord(sequence=n, chunk=c) for n, c in enumerate(chunks, start=1)]


def test_the_first_delta_of_the_step_marks_the_start() -> None:
    records = _records(_delta("r", 1, "old step"), _delta("other", 2, "x"), _delta("r", 2, "a"), _delta("r", 2, "b"))
    assert dead_attempt_start(records, "r", 2) == 2


def test_after_a_resync_only_the_later_attempts_deltas_count() -> None:
    records = _records(_delta("r", 1, "a"), _resync("r", 1, 0), _delta("r", 1, "b"), _delta("r", 1, "c"))
    assert dead_attempt_start(records, "r", 1) == 2


def test_no_delta_since_the_last_resync_means_nothing_to_void() -> None:
    records = _records(
        _delta("r", 1, "a"),
        _resync("r", 1, 0),
        ToolStartChunk(agent_id="r", agent_type="a", step=1, tool_call_id="t", tool_name="x", arguments={}),
    )
    assert dead_attempt_start(records, "r", 1) is None
