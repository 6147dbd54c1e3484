"""SqlStreamManager on SQLite and PostgreSQL: what only a durable manager has.

The behaviour every manager shares is the contract suite (``test_stream_manager_contract.py``, run
on the in-memory manager too). Here: storage as written, ``records()``, truncation seen from
another process, batching, dedupe keys, two managers on one database (two processes), NOTIFY
wake-ups and the LISTEN reconnect, readers on other event loops, failed commits, back-pressure,
closing, deletion and activation. Per-stream isolation of refused chunks is
``test_stream_isolation.py``; outages are ``tests/durability``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos.errors import HelixError, StreamTruncatedError
from helix_dbos.store.dialect import RidingWrite
from helix_dbos.stream.base import ChunkRecord, StreamInfo
from helix_dbos.stream.chunks import (
    ToolStartChunk,
    chunk_to_json,
)
from helix_dbos.stream.sql import SqlStreamManager, SqlStreamReader, SqlStreamWriter
from tests.stream.conftest import MakeManager
from tests.stream.helpers import TIMEOUT, contents, drain, idle, next_chunk, text


async def require_reader(manager: SqlStreamManager, stream_id: str, from_sequence: int = 0) -> SqlStreamReader:
    reader = await manager.create_resumable_reader(stream_id, from_sequence=from_sequence)
    assert reader is not None
    return reader


# --- storage -------------------------------------------------------------------------------------


async def test_chunks_are_stored_verbatim_and_isolated_from_mutation(manager: SqlStreamManager) -> None:
    writer = await manager.create_writer("s1", "run-1", "writer")
    chunk = ToolStartChunk(
        agent_id="s1", agent_type="writer", tool_call_id="c1", tool_name="t", arguments={"z": 1, "a": [2]}, step=3
    )
    await writer.write(chunk)
    expected = chunk_to_json(chunk)
    chunk.arguments["z"] = "mutated by writer"
    await writer.flush()
    with manager.engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT CAST(chunk AS TEXT), type, step, run_id FROM helix_stream_chunks WHERE stream_id = 's1'")
        ).one()
    # Byte for byte what the wire format says: key order kept (plain JSON, not JSONB).
    assert tuple(row) == (expected, "tool_start", 3, "run-1")
    reader = await require_reader(manager, "s1")
    first = await next_chunk(reader)
    assert isinstance(first, ToolStartChunk)
    assert first.arguments == {"z": 1, "a": [2]}


# --- records() -----------------------------------------------------------------------------------


async def test_records_of_an_unknown_stream_yields_nothing(manager: SqlStreamManager) -> None:
    assert [r async for r in manager.records("missing")] == []


async def test_records_follows_the_stream_with_sequences(manager: SqlStreamManager) -> None:
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("a"))

    async def collect() -> list[ChunkRecord]:
        return [record async for record in manager.records("s1", after_sequence=0)]

    consumer = asyncio.create_task(asyncio.wait_for(collect(), TIMEOUT))
    await idle()
    await writer.write(text("b"))
    await manager.end_stream("s1")
    records = await consumer
    assert [(r.sequence, contents([r.chunk])[0]) for r in records] == [(1, "a"), (2, "b")]


# --- cleanup_to_step (crash recovery, G4) --------------------------------------------------------


async def write_steps(manager: SqlStreamManager) -> SqlStreamWriter:
    """Sequences 1..4: step 1, step 2, step 2, no step (a boundary marker)."""
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("s1", step=1))
    await writer.write(text("s2a", step=2))
    await writer.write(text("s2b", step=2))
    await writer.write(text("marker", step=None))
    await writer.flush()
    return writer


async def test_truncation_seen_by_a_reader_in_another_process(make_manager: MakeManager) -> None:
    owner, other = make_manager(), make_manager()
    await write_steps(owner)
    reader = await require_reader(other, "s1", from_sequence=1)  # it had read sequence 1 elsewhere
    await owner.cleanup_to_step("s1", 1)
    with pytest.raises(StreamTruncatedError) as caught:  # detected via the stored marker
        await next_chunk(reader)
    assert (caught.value.last_valid_sequence, caught.value.truncated_at_step) == (1, 1)
    again = await require_reader(other, "s1", from_sequence=1)
    await owner.end_stream("s1")
    assert contents(await drain(again)) == ["marker"]


# --- batching ------------------------------------------------------------------------------------------------


async def test_writes_are_batched_into_few_transactions(make_manager: MakeManager) -> None:
    manager = make_manager(batch_max_chunks=50, batch_max_delay=0.05)
    batches = 0

    def count(_conn: Any, _cursor: Any, statement: str, *args: Any) -> None:
        nonlocal batches
        # A batch's upsert of the stream row (in a transaction, or alone on PostgreSQL)
        batches += statement.lstrip().startswith(("INSERT INTO helix_streams", "WITH st AS"))

    sa.event.listen(manager.engine, "before_cursor_execute", count)
    writer = await manager.create_writer("s1", "run-1", "writer")
    batches = 0
    for n in range(500):
        await writer.write(text(str(n)))
    await writer.flush()
    assert 10 <= batches <= 60  # 500 chunks, 50 per batch (plus partial batches on a slow machine)
    records = await manager.read_records("s1")
    assert [r.sequence for r in records] == list(range(1, 501))
    assert contents([r.chunk for r in records]) == [str(n) for n in range(500)]


async def test_close_commits_queued_chunks(make_manager: MakeManager) -> None:
    writer_side = make_manager(batch_max_delay=10.0, batch_max_chunks=1000)
    writer = await writer_side.create_writer("s1", "run-1", "writer")
    for n in range(3):
        await writer.write(text(str(n)))
    await writer_side.aclose()
    assert contents([r.chunk for r in await make_manager().read_records("s1")]) == ["0", "1", "2"]


# --- dedupe keys (replayed workflows) ------------------------------------------------------------


async def test_dedupe_key_stores_a_chunk_once_without_gaps(make_manager: MakeManager) -> None:
    manager = make_manager()
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("a"), dedupe_key="run-1:0")
    await writer.write(text("a again"), dedupe_key="run-1:0")  # same batch
    await writer.write(text("b"), dedupe_key="run-1:1")
    await writer.write(text("no key"))
    await writer.write(text("no key"))  # no key: always stored
    await writer.flush()
    await writer.write(text("b again"), dedupe_key="run-1:1")  # a later batch
    await manager.write_keyed("s1", text("c"), "run-1:2", run_id="run-1")

    # A replay in another process re-emits the same deterministic chunks, then goes on.
    replay = make_manager()
    replay_writer = await replay.create_writer("s1", "run-1", "writer")
    for n, word in enumerate(["a", "b"]):
        await replay_writer.write(text(word), dedupe_key=f"run-1:{n}")
    await replay_writer.write(text("c"), dedupe_key="run-1:2")
    await replay_writer.write(text("d"), dedupe_key="run-1:3")
    await replay_writer.flush()

    records = await manager.read_records("s1")
    assert [(r.sequence, contents([r.chunk])[0]) for r in records] == [
        (1, "a"),
        (2, "b"),
        (3, "no key"),
        (4, "no key"),
        (5, "c"),
        (6, "d"),
    ]
    assert await manager.get_stream_info("s1") == StreamInfo(status="active", latest_sequence=6, chunk_count=6)


async def test_a_removed_keyed_chunk_can_be_written_again(manager: SqlStreamManager) -> None:
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("step 1", step=1), dedupe_key="k1")
    await writer.write(text("step 2", step=2), dedupe_key="k2")
    await manager.cleanup_to_step("s1", 1)
    await writer.write(text("step 2 retried", step=2), dedupe_key="k2")  # the re-executed step
    records = await manager.read_records("s1")
    assert [(r.sequence, contents([r.chunk])[0]) for r in records] == [(1, "step 1"), (3, "step 2 retried")]


# --- two processes, other loops, NOTIFY ----------------------------------------------------------


async def test_writer_in_one_process_reader_in_another(make_manager: MakeManager) -> None:
    writer_side, reader_side = make_manager(), make_manager()
    writer = await writer_side.create_writer("s1", "run-1", "writer")
    await writer.write(text("first"))
    await writer.flush()
    reader = await require_reader(reader_side, "s1")
    consumer = asyncio.create_task(drain(reader))
    await idle()
    for n in range(20):
        await writer.write(text(f"live-{n}"))
    await writer_side.end_stream("s1")
    assert contents(await consumer) == ["first", *(f"live-{n}" for n in range(20))]
    info = await reader_side.get_stream_info("s1")
    assert info == StreamInfo(status="ended", latest_sequence=21, chunk_count=21)


async def test_a_stream_ended_elsewhere_fails_the_writers_next_call(make_manager: MakeManager) -> None:
    owner, other = make_manager(), make_manager()
    writer = await owner.create_writer("s1", "run-1", "writer")
    await other.end_stream("s1")
    await writer.write(text("late"))  # queued: this process does not know about the end yet
    with pytest.raises(HelixError, match="has ended") as caught:
        await writer.flush()
    assert caught.value.code == "transport_error"
    with pytest.raises(HelixError, match="has ended"):  # now it knows
        await writer.write(text("later"))
    assert await owner.read_records("s1") == []


async def test_reader_on_another_event_loop(manager: SqlStreamManager) -> None:
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("a"))
    result: list[str] = []
    errors: list[BaseException] = []

    async def consume() -> None:
        reader = await require_reader(manager, "s1")
        result.extend(contents(await drain(reader)))

    def run() -> None:
        try:
            asyncio.run(consume())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    await idle()
    await writer.write(text("b"))
    await manager.end_stream("s1")
    await asyncio.to_thread(thread.join, TIMEOUT)
    assert not errors
    assert result == ["a", "b"]


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_notify_wakes_a_reader_in_another_process_without_polling(make_manager: MakeManager) -> None:
    writer_side = make_manager(batch_max_delay=0)
    reader_side = make_manager(poll_interval=30.0)  # polling alone would take 30 s
    writer = await writer_side.create_writer("s1", "run-1", "writer")
    reader = await require_reader(reader_side, "s1")
    deadline = time.monotonic() + TIMEOUT
    while not reader_side.listening and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert reader_side.listening
    for n in range(3):
        pending = asyncio.create_task(next_chunk(reader))
        await idle()  # the reader is parked
        started = time.monotonic()
        await writer.write(text(f"n{n}"))
        assert contents([await pending]) == [f"n{n}"]
        assert time.monotonic() - started < 0.5


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_readers_poll_while_the_listen_connection_is_down_and_it_comes_back(
    make_manager: MakeManager,
) -> None:
    writer_side, reader_side = make_manager(), make_manager()
    writer = await writer_side.create_writer("s1", "run-1", "writer")
    reader = await require_reader(reader_side, "s1")
    deadline = time.monotonic() + TIMEOUT
    while not reader_side.listening and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    with writer_side.engine.connect() as conn:
        killed = conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN helix_streams%'"
            )
        ).all()
    assert killed == [(True,)]
    await writer.write(text("while down"))
    assert contents([await next_chunk(reader)]) == ["while down"]
    deadline = time.monotonic() + TIMEOUT
    while not reader_side.listening and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert reader_side.listening  # reconnected
    await writer.write(text("after"))
    assert contents([await next_chunk(reader)]) == ["after"]


# --- failures and limits -------------------------------------------------------------------------


async def test_a_failed_commit_is_reported_by_the_writer_and_writing_goes_on(
    manager: SqlStreamManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = await manager.create_writer("s1", "run-1", "writer")
    original = manager._storage.append

    def broken(*args: Any) -> bool:
        raise sa.exc.OperationalError("INSERT", {}, Exception("connection lost"))

    monkeypatch.setattr(manager._storage, "append", broken)
    alone = manager._storage.dialect.append_alone  # a one-stream batch's statement on PostgreSQL
    monkeypatch.setattr(manager._storage.dialect, "append_alone", broken)
    await writer.write(text("lost"))
    with pytest.raises(HelixError, match="connection lost") as caught:
        await writer.flush()
    assert caught.value.code == "transport_error"
    monkeypatch.setattr(manager._storage, "append", original)
    monkeypatch.setattr(manager._storage.dialect, "append_alone", alone)
    await writer.write(text("kept"))
    await writer.flush()
    assert contents([r.chunk for r in await manager.read_records("s1")]) == ["kept"]


async def test_writes_wait_for_the_flusher_above_max_pending(make_manager: MakeManager) -> None:
    manager = make_manager(max_pending_chunks=10, batch_max_chunks=4)
    writer = await manager.create_writer("s1", "run-1", "writer")
    for n in range(100):
        await writer.write(text(str(n)))
        assert manager._flusher._chunks <= 11
    assert [r.sequence for r in await manager.read_records("s1")] == list(range(1, 101))


async def test_closing_the_manager_stops_waiting_readers_and_refuses_calls(make_manager: MakeManager) -> None:
    manager = make_manager()
    await manager.create_writer("s1", "run-1", "writer")
    reader = await require_reader(manager, "s1")
    consumer = asyncio.create_task(drain(reader))
    await idle()
    await manager.aclose()
    assert await consumer == []
    with pytest.raises(HelixError, match="closed"):
        await manager.create_writer("s1", "run-1", "writer")


async def test_an_unmigrated_database_is_refused(tmp_path: Any) -> None:
    with pytest.raises(HelixError, match="helix-dbos db upgrade"):
        SqlStreamManager(f"sqlite:///{tmp_path / 'empty.sqlite'}")


async def test_delete_stream_removes_it_and_stops_readers(manager: SqlStreamManager) -> None:
    writer = await manager.create_writer("s1", "run-1", "writer")
    await writer.write(text("a"))
    reader = await require_reader(manager, "s1")
    consumer = asyncio.create_task(drain(reader))
    await idle()
    await manager.delete_stream("s1")
    assert contents(await consumer) == ["a"]
    assert await manager.get_stream_info("s1") is None
    assert await manager.read_records("s1") == []
    await manager.create_writer("s1", "run-2", "writer")  # the id can be used again, from scratch
    assert await manager.get_stream_info("s1") == StreamInfo(status="active", latest_sequence=0, chunk_count=0)


async def test_activate_reopens_a_stream_another_process_ended(pg_store_url: str) -> None:
    """A run's start reactivates the stream in the database even when this manager's cache says
    it is active (another process ended or failed it meanwhile)."""
    from helix_dbos.stream.chunks import TextDeltaChunk
    from helix_dbos.stream.sql import SqlStreamManager

    here, elsewhere = SqlStreamManager(pg_store_url), SqlStreamManager(pg_store_url)
    try:
        writer = await here.create_writer("shared", "run-1", "agent")
        await writer.write(TextDeltaChunk(agent_id="run-1", agent_type="agent", content="a"))
        await writer.flush()
        await elsewhere.fail_stream("shared", "aborted elsewhere")
        await here.activate("shared")
        writer = await here.create_writer("shared", "run-2", "agent")
        await writer.write(TextDeltaChunk(agent_id="run-2", agent_type="agent", content="b"))
        await writer.flush()
        info = await here.get_stream_info("shared")
        assert info is not None and info.status == "active"
        contents = [r.chunk.content for r in await here.read_records("shared") if isinstance(r.chunk, TextDeltaChunk)]
        assert contents == ["a", "b"]
    finally:
        await here.aclose()
        await elsewhere.aclose()


def patient(manager: SqlStreamManager, stream_id: str) -> None:
    """Make the stream's queued chunks wait for a hold (as a run's do once its first commit took them)."""
    first = manager.hold_for_transaction(stream_id, manager._engine)
    assert first is not None and len(first) == 0
    first.release(stored=True)


def carry(manager: SqlStreamManager, stream_id: str, words: list[str]) -> None:
    """Queue ``words`` (keyed ``run-1:0``, ...) and store them as a step commit does: held, then
    written by another statement's transaction (riding in it on PostgreSQL)."""
    for n, word in enumerate(words):
        manager.enqueue_keyed(stream_id, text(word), f"run-1:{n}", run_id="run-1")
    held = manager.hold_for_transaction(stream_id, manager._engine)
    assert held is not None and len(held) == len(words)
    writes = held.for_commit()
    assert writes is not None
    assert isinstance(writes, RidingWrite) is (manager._engine.dialect.name == "postgresql")
    with manager._engine.begin() as conn:
        if isinstance(writes, RidingWrite):
            host = f"WITH host AS (SELECT 1), {writes.ctes} SELECT 1, {writes.columns}"
            row = conn.execute(sa.text(host), dict(writes.params)).one()
            writes.finish(conn, tuple(row)[1:])
        else:
            writes(conn)
    held.release(stored=True)


async def test_held_chunks_ride_in_a_host_statement_once_each_and_without_gaps(make_manager: MakeManager) -> None:
    """A step commit carries a stream's queued chunks: on PostgreSQL inside its own statement (a
    ``RidingWrite``), on SQLite with statements of their own. A replayed batch, which re-emits
    chunks already stored, stores none of them twice and leaves no gap in the sequences."""
    manager = make_manager(batch_max_delay=30.0)  # nothing is flushed meanwhile: only the host stores
    patient(manager, "s1")
    carry(manager, "s1", ["a", "b"])
    carry(manager, "s1", ["a", "b", "c"])  # a replay re-emits a and b, then goes on
    records = await manager.read_records("s1")
    assert [(r.sequence, contents([r.chunk])[0]) for r in records] == [(1, "a"), (2, "b"), (3, "c")]
    info = await manager.get_stream_info("s1")
    assert info is not None and info.latest_sequence == 3  # the replay's unused numbers were given back


async def test_held_chunks_for_a_stream_ended_elsewhere_are_refused_not_stored(make_manager: MakeManager) -> None:
    """The stream ended in another process: the carried chunks are not stored, and this manager
    learns the end (its next write is refused at once), as when the flusher finds the end."""
    manager, other = make_manager(batch_max_delay=30.0), make_manager()
    await other.write_keyed("s2", text("x"), None)
    await other.flush()
    await other.end_stream("s2")
    patient(manager, "s2")
    carry(manager, "s2", ["a"])
    assert contents([r.chunk for r in await manager.read_records("s2")]) == ["x"]
    with pytest.raises(HelixError, match="has ended"):
        manager.enqueue_keyed("s2", text("b"), None)
