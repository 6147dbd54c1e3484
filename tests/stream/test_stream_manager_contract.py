"""One contract for every StreamManager: in-memory, SQLite and PostgreSQL run the same suite.

Live readers, sequences, end/fail, reactivation for the next turn, the paused status, G4 truncation
(``cleanup_to_step``), reset, and one total order for concurrent writers. A manager that behaves
differently here is wrong; what only one implementation has is tested apart
(``test_memory_stream_manager.py``, ``test_sql_stream_manager.py``, ``test_stream_isolation.py``).

The tests use the protocols only (``helix_dbos.stream.base``). A SQL manager commits chunks in the
background, so a test gives a live reader a moment (:func:`idle`) where the in-memory one would need
none, and a SQL reader's counters are as of its last query (asserted after it read).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from helix_dbos.errors import HelixError, StreamTruncatedError
from helix_dbos.stream.base import ResumableStreamReader, StreamInfo, StreamManager, StreamWriter
from helix_dbos.stream.chunks import (
    RunPausedChunk,
    RunResumedChunk,
    StepCommittedChunk,
    StreamChunk,
    TextDeltaChunk,
)
from tests.stream.helpers import TIMEOUT, contents, drain, idle, next_chunk, text


async def require_reader(manager: StreamManager, stream_id: str, from_sequence: int = 0) -> ResumableStreamReader:
    reader = await manager.create_resumable_reader(stream_id, from_sequence=from_sequence)
    assert reader is not None
    return reader


# --- creation, sequences, storage ----------------------------------------------------------------


async def test_unknown_stream_has_no_reader_and_no_info(stream_manager: StreamManager) -> None:
    manager = stream_manager
    assert await manager.create_reader("missing") is None
    assert await manager.create_resumable_reader("missing", from_sequence=3) is None
    assert await manager.get_stream_info("missing") is None
    assert await manager.read_records("missing") == []


async def test_create_writer_creates_an_empty_active_stream(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await manager.create_writer("s1", "run-1", "writer")
    assert await manager.get_stream_info("s1") == StreamInfo(status="active", latest_sequence=0, chunk_count=0)
    assert await manager.create_reader("s1") is not None


async def test_sequences_start_at_one_and_increase(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    for word in ("a", "b", "c"):
        await writer.write(text(word))
    records = await manager.read_records("s1")
    assert [r.sequence for r in records] == [1, 2, 3]
    assert contents([r.chunk for r in records]) == ["a", "b", "c"]
    assert [r.sequence for r in await manager.read_records("s1", after_sequence=2)] == [3]
    assert await manager.get_stream_info("s1") == StreamInfo(status="active", latest_sequence=3, chunk_count=3)


async def test_stored_chunks_are_isolated_from_writer_and_reader_mutation(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    chunk = text("original")
    await writer.write(chunk)
    chunk.content = "mutated by writer"
    reader = await require_reader(manager, "s1")
    first = await next_chunk(reader)
    assert isinstance(first, TextDeltaChunk)
    assert first.content == "original"
    first.content = "mutated by reader"
    assert contents([r.chunk for r in await manager.read_records("s1")]) == ["original"]


# --- live readers --------------------------------------------------------------------------------


async def test_live_reader_receives_chunks_written_after_it_attached(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("before"))
    reader = await require_reader(manager, "s1")
    consumer = asyncio.create_task(drain(reader))
    await idle()
    assert not consumer.done()  # it is waiting for more, not finished

    await writer.write(text("after-1"))
    await idle()
    assert not consumer.done()
    await writer.write(text("after-2"))
    await manager.end_stream("s1", output={"ok": True})

    assert contents(await consumer) == ["before", "after-1", "after-2"]


async def test_every_attached_reader_sees_every_chunk(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    readers = [await require_reader(manager, "s1") for _ in range(3)]
    consumers = [asyncio.create_task(drain(r)) for r in readers]
    await idle()
    for word in ("x", "y", "z"):
        await writer.write(text(word))
    await manager.end_stream("s1")
    for consumer in consumers:
        assert contents(await consumer) == ["x", "y", "z"]


async def test_resumable_reader_starts_after_the_given_sequence(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    for word in ("a", "b", "c", "d"):
        await writer.write(text(word))
    reader = await require_reader(manager, "s1", from_sequence=2)
    assert (reader.current_sequence, reader.total_chunks, reader.latest_sequence) == (2, 4, 4)

    assert contents([await next_chunk(reader)]) == ["c"]
    assert reader.current_sequence == 3
    assert contents([await next_chunk(reader)]) == ["d"]
    assert reader.current_sequence == 4

    await writer.write(text("e"))
    assert contents([await next_chunk(reader)]) == ["e"]
    # A SQL reader's counters are as of its last query, which fetched "e".
    assert (reader.current_sequence, reader.total_chunks, reader.latest_sequence) == (5, 5, 5)


async def test_reconnect_from_the_last_sequence_reads_each_chunk_exactly_once(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    for n in range(10):
        await writer.write(text(f"t{n}"))
    first = await require_reader(manager, "s1")
    seen = [await next_chunk(first) for _ in range(5)]
    last_event_id = first.current_sequence
    await first.close()  # the client disconnects

    for n in range(10, 13):  # the run goes on while it is away
        await writer.write(text(f"t{n}"))
    await manager.end_stream("s1")
    again = await require_reader(manager, "s1", from_sequence=last_event_id)
    seen += await drain(again)
    assert contents(seen) == [f"t{n}" for n in range(13)]


async def test_resumable_reader_past_the_end_waits_for_new_chunks(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("a"))
    reader = await require_reader(manager, "s1", from_sequence=1)
    pending = asyncio.create_task(next_chunk(reader))
    await idle()
    assert not pending.done()
    await writer.write(text("b"))
    assert contents([await pending]) == ["b"]


async def test_close_stops_a_reader_that_is_waiting(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await manager.create_writer("s1", "run-1", "writer")
    reader = await require_reader(manager, "s1")
    consumer = asyncio.create_task(drain(reader))
    await idle()
    assert not consumer.done()
    await reader.close()
    assert await consumer == []
    with pytest.raises(StopAsyncIteration):
        await anext(reader)


async def test_iterating_a_reader_concurrently_with_writes_from_threads(stream_manager: StreamManager) -> None:
    """Writes submitted from worker threads (as workflow steps do) keep their order per thread."""
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    loop = asyncio.get_running_loop()

    def produce(index: int) -> None:
        for n in range(30):
            asyncio.run_coroutine_threadsafe(writer.write(text(f"{index}:{n}")), loop).result(TIMEOUT)

    reader = await require_reader(manager, "s1")

    async def consume() -> AsyncIterator[str]:
        async for chunk in reader:
            yield contents([chunk])[0]

    await asyncio.gather(*(asyncio.to_thread(produce, i) for i in range(3)))
    await manager.end_stream("s1")
    seen = [c async for c in consume()]
    assert len(seen) == 90
    for index in range(3):
        assert [c for c in seen if c.startswith(f"{index}:")] == [f"{index}:{n}" for n in range(30)]


# --- end and fail --------------------------------------------------------------------------------


async def test_reader_attached_after_end_yields_everything_then_stops(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("a"))
    await writer.write(text("b"))
    await manager.end_stream("s1")
    info = await manager.get_stream_info("s1")
    assert info is not None and info.status == "ended"
    reader = await require_reader(manager, "s1")
    assert contents(await drain(reader)) == ["a", "b"]


async def test_writing_to_an_ended_stream_raises(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await manager.end_stream("s1")
    with pytest.raises(HelixError) as caught:
        await writer.write(text("late"))
    assert caught.value.code == "transport_error"
    assert await manager.read_records("s1") == []


async def test_new_writer_reactivates_an_ended_stream_for_the_next_turn(stream_manager: StreamManager) -> None:
    manager = stream_manager
    turn1 = await manager.create_writer("s1", "run-1", "writer")
    await turn1.write(text("turn-1"))
    slow_reader = await require_reader(manager, "s1")  # attached during turn 1, reads nothing yet
    await manager.end_stream("s1")

    turn2 = await manager.create_writer("s1", "run-2", "writer")
    assert (await manager.get_stream_info("s1")) == StreamInfo(status="active", latest_sequence=1, chunk_count=1)
    await turn2.write(text("turn-2"))
    assert [r.sequence for r in await manager.read_records("s1")] == [1, 2]

    # The slow reader finishes at the end of turn 1 even though the stream is active again.
    assert contents(await drain(slow_reader)) == ["turn-1"]
    # A reader attached now follows turn 2 live.
    reader = await require_reader(manager, "s1", from_sequence=1)
    assert contents([await next_chunk(reader)]) == ["turn-2"]


async def test_failed_stream_yields_stored_chunks_then_raises(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("partial"))
    reader = await require_reader(manager, "s1")
    late_reader_chunks: list[StreamChunk] = []

    await manager.fail_stream("s1", "model exploded")
    assert contents([await next_chunk(reader)]) == ["partial"]
    with pytest.raises(HelixError) as caught:
        await next_chunk(reader)
    assert caught.value.code == "transport_error"
    assert caught.value.message == "model exploded"
    with pytest.raises(StopAsyncIteration):
        await anext(reader)

    late = await require_reader(manager, "s1")
    with pytest.raises(HelixError, match="model exploded"):
        async for chunk in late:
            late_reader_chunks.append(chunk)
    assert contents(late_reader_chunks) == ["partial"]
    info = await manager.get_stream_info("s1")
    assert info is not None and info.status == "failed"


async def test_end_and_fail_create_unknown_streams(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await manager.end_stream("ended-early")
    await manager.fail_stream("failed-early", "bad input")
    ended = await require_reader(manager, "ended-early")
    assert await drain(ended) == []
    failed = await require_reader(manager, "failed-early")
    with pytest.raises(HelixError, match="bad input"):
        await drain(failed)


async def test_closed_writer_refuses_writes_but_the_stream_stays_open(stream_manager: StreamManager) -> None:
    manager = stream_manager
    first = await manager.create_writer("s1", "run-1", "writer")
    await first.close()
    with pytest.raises(HelixError):
        await first.write(text("x"))
    second = await manager.create_writer("s1", "run-1", "writer")
    await second.write(text("y"))
    info = await manager.get_stream_info("s1")
    assert info == StreamInfo(status="active", latest_sequence=1, chunk_count=1)


async def test_run_paused_and_resumed_chunks_drive_the_paused_status(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    reader = await require_reader(manager, "s1")
    await writer.write(RunPausedChunk(agent_id="s1", agent_type="writer", pending_tool_call_ids=["c1"]))
    await writer.write(StepCommittedChunk(agent_id="s1", agent_type="writer", step_count=1))
    info = await manager.get_stream_info("s1")
    assert info is not None and info.status == "paused"
    await writer.write(RunResumedChunk(agent_id="s1", agent_type="writer", run_id="run-1"))
    info = await manager.get_stream_info("s1")
    assert info is not None and info.status == "active"
    await manager.end_stream("s1")
    assert [c.type for c in await drain(reader)] == ["run_paused", "step_committed", "run_resumed"]


async def test_create_writer_reactivates_a_paused_stream(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(RunPausedChunk(agent_id="s1", agent_type="writer"))
    await manager.create_writer("s1", "run-1", "writer")
    info = await manager.get_stream_info("s1")
    assert info is not None and info.status == "active"


# --- cleanup_to_step (crash recovery, G4) --------------------------------------------------------


async def write_steps(manager: StreamManager) -> StreamWriter:
    """Sequences 1..4: step 1, step 2, step 2, no step (a boundary marker)."""
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("s1", step=1))
    await writer.write(text("s2a", step=2))
    await writer.write(text("s2b", step=2))
    await writer.write(text("marker", step=None))
    return writer


async def test_cleanup_removes_only_chunks_of_later_steps(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await write_steps(manager)
    await manager.cleanup_to_step("s1", 1)
    records = await manager.read_records("s1")
    assert [(r.sequence, r.chunk.step) for r in records] == [(1, 1), (4, None)]
    assert await manager.get_stream_info("s1") == StreamInfo(status="active", latest_sequence=4, chunk_count=2)

    await writer.write(text("retry", step=2))
    # Sequences are never reused: the retried step gets 5, not 2.
    assert [r.sequence for r in await manager.read_records("s1")] == [1, 4, 5]


async def test_cleanup_to_the_current_step_keeps_everything(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await write_steps(manager)
    reader = await require_reader(manager, "s1")
    await manager.cleanup_to_step("s1", 2)
    assert len(await manager.read_records("s1")) == 4
    await manager.end_stream("s1")
    assert contents(await drain(reader)) == ["s1", "s2a", "s2b", "marker"]


async def test_cleanup_raises_truncated_on_a_reader_that_missed_removed_chunks(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await write_steps(manager)
    reader = await require_reader(manager, "s1")
    assert contents([await next_chunk(reader)]) == ["s1"]  # cursor at 1; 2 and 3 not yet yielded

    await manager.cleanup_to_step("s1", 1)
    with pytest.raises(StreamTruncatedError) as caught:
        await next_chunk(reader)
    error = caught.value
    assert (error.stream_id, error.last_valid_sequence, error.truncated_at_step) == ("s1", 1, 1)
    assert error.code == "transport_error"
    with pytest.raises(StopAsyncIteration):  # then the reader is done
        await anext(reader)

    # Re-attaching from the last valid sequence reads the survivors and then follows live.
    again = await require_reader(manager, "s1", from_sequence=error.last_valid_sequence)
    assert contents([await next_chunk(again)]) == ["marker"]
    assert again.current_sequence == 4


async def test_cleanup_wakes_a_waiting_reader_with_the_truncation(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("s1", step=1))
    reader = await require_reader(manager, "s1")
    assert contents([await next_chunk(reader)]) == ["s1"]
    # Chunk 2 arrives and is removed before the reader gets to run.
    await writer.write(text("s2", step=2))
    await manager.cleanup_to_step("s1", 1)
    with pytest.raises(StreamTruncatedError) as caught:
        await next_chunk(reader)
    assert caught.value.last_valid_sequence == 1


async def test_reader_that_already_yielded_removed_chunks_still_sees_survivors(stream_manager: StreamManager) -> None:
    # The seed's cursor-rebase bug: an index-based cursor skips survivors after a cleanup.
    manager = stream_manager
    writer = await write_steps(manager)
    reader = await require_reader(manager, "s1")
    assert contents([await next_chunk(reader) for _ in range(3)]) == ["s1", "s2a", "s2b"]

    await manager.cleanup_to_step("s1", 1)  # removes 2 and 3, both already yielded: no truncation
    assert contents([await next_chunk(reader)]) == ["marker"]

    pending = asyncio.create_task(next_chunk(reader))
    await idle()
    assert not pending.done()
    await writer.write(text("retry", step=2))
    assert contents([await pending]) == ["retry"]
    assert reader.current_sequence == 5


async def test_waiting_reader_survives_cleanup_and_keeps_following(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await write_steps(manager)
    reader = await require_reader(manager, "s1")
    consumer = asyncio.create_task(drain(reader))
    await idle()  # the reader yielded all four and now waits
    assert not consumer.done()

    await manager.cleanup_to_step("s1", 1)
    await writer.write(text("after", step=2))
    await manager.end_stream("s1")
    assert contents(await consumer) == ["s1", "s2a", "s2b", "marker", "after"]


async def test_reader_attached_after_cleanup_sees_only_survivors(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await write_steps(manager)
    await manager.cleanup_to_step("s1", 1)
    await manager.end_stream("s1")
    reader = await require_reader(manager, "s1")
    assert contents(await drain(reader)) == ["s1", "marker"]


async def test_cleanup_of_an_unknown_stream_is_a_no_op(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await manager.cleanup_to_step("missing", 0)
    assert await manager.get_stream_info("missing") is None


# --- reset ---------------------------------------------------------------------------------------


async def test_reset_clears_chunks_reactivates_and_keeps_counting(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("old-1"))
    await writer.write(text("old-2"))
    attached = await require_reader(manager, "s1")
    await manager.end_stream("s1")

    await manager.reset_stream("s1")
    assert await manager.get_stream_info("s1") == StreamInfo(status="active", latest_sequence=2, chunk_count=0)
    assert await drain(attached) == []  # readers attached before the reset are detached

    await writer.write(text("new"))
    records = await manager.read_records("s1")
    assert [(r.sequence, contents([r.chunk])[0]) for r in records] == [(3, "new")]
    fresh = await require_reader(manager, "s1")
    assert contents([await next_chunk(fresh)]) == ["new"]


async def test_reset_stops_a_waiting_reader_of_an_active_stream(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("old"))
    reader = await require_reader(manager, "s1")
    consumer = asyncio.create_task(drain(reader))
    await idle()
    await manager.reset_stream("s1")
    assert contents(await consumer) == ["old"]


# --- ordering ------------------------------------------------------------------------------------


async def test_concurrent_writers_get_one_total_order(stream_manager: StreamManager) -> None:
    manager = stream_manager
    writers = [await manager.create_writer("s1", f"run-{i}", "writer") for i in range(4)]
    reader = await require_reader(manager, "s1")
    consumer = asyncio.create_task(drain(reader))

    async def produce(index: int) -> None:
        for n in range(25):
            await writers[index].write(text(f"{index}:{n}", agent_id=f"agent-{index}"))
            await asyncio.sleep(0)  # yield so the writers interleave

    await asyncio.gather(*(produce(i) for i in range(4)))
    await manager.end_stream("s1")
    seen = contents(await consumer)
    records = await manager.read_records("s1")

    assert [r.sequence for r in records] == list(range(1, 101))
    assert seen == contents([r.chunk for r in records])  # the reader's order is the stored order
    for index in range(4):
        mine = [c for c in seen if c.startswith(f"{index}:")]
        assert mine == [f"{index}:{n}" for n in range(25)]  # each writer's own order is kept
    assert len({c.split(":")[0] for c in seen[:10]}) > 1  # the writers really did interleave


# --- keyed writes (what replay's dedupe relies on) -------------------------------------------------


async def test_a_keyed_chunk_is_stored_once_per_key(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await manager.write_keyed("s1", text("a", step=1), "run-1:a", run_id="run-1")  # creates the stream
    await manager.write_keyed("s1", text("a again", step=1), "run-1:a", run_id="run-1")  # a replay
    await manager.write_keyed("s1", text("b", step=1), "run-1:b", run_id="run-1")
    await manager.write_keyed("s1", text("free", step=1), None)
    await manager.write_keyed("s1", text("free", step=1), None)
    records = await manager.read_records("s1")
    assert contents([r.chunk for r in records]) == ["a", "b", "free", "free"]
    assert [r.sequence for r in records] == [1, 2, 3, 4]  # a dropped duplicate takes no sequence


async def test_a_key_frees_up_when_its_chunk_is_removed(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await manager.write_keyed("s1", text("kept", step=1), "k1")
    await manager.write_keyed("s1", text("removed", step=2), "k2")
    await manager.cleanup_to_step("s1", 1)
    await manager.write_keyed("s1", text("kept again", step=1), "k1")
    await manager.write_keyed("s1", text("rewritten", step=2), "k2")
    assert contents([r.chunk for r in await manager.read_records("s1")]) == ["kept", "rewritten"]
    await manager.reset_stream("s1")
    await manager.write_keyed("s1", text("after reset", step=1), "k1")
    assert contents([r.chunk for r in await manager.read_records("s1")]) == ["after reset"]


async def test_a_keyed_write_does_not_reopen_an_ended_stream(stream_manager: StreamManager) -> None:
    manager = stream_manager
    await manager.write_keyed("s1", text("a"), "k1")
    await manager.end_stream("s1")
    with pytest.raises(HelixError):
        await manager.write_keyed("s1", text("late"), "k2")
    info = await manager.get_stream_info("s1")
    assert info is not None and (info.status, info.latest_sequence) == ("ended", 1)
