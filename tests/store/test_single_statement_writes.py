"""Writes that are one statement run outside a transaction on PostgreSQL, and fall back whole when they cannot.

A step commit (with the run's chunks riding in it), a flusher batch of one stream and a stream's end
are each one statement in the common case: autocommitted, they cost one round trip instead of three
(``BEGIN`` and ``COMMIT`` are round trips of their own). A commit or batch that is not the common
case (a replayed chunk whose hole must be closed under the row lock, a conflict that must not keep
its answers marked applied) fails its one statement whole, by a guard, and runs in a transaction as
before. These pin both halves: the round trips, and that the fallback leaves what it always left.
"""

from __future__ import annotations

import psycopg
import pytest

from helix_dbos.errors import HelixError
from helix_dbos.messages import AssistantMessage
from helix_dbos.runtime.aio import background_loop
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.base import StepCommit
from helix_dbos.store.dialect import RidingWrite
from helix_dbos.store.retry import RetryPolicy
from helix_dbos.stream.base import StreamStatus
from helix_dbos.stream.sql import SqlStreamManager
from helix_dbos.stream.sql.flusher import PendingChunk, storage_body
from helix_dbos.stream.sql.listen import NOTIFY_CHANNEL
from helix_dbos.stream.sql.postgres import PostgresStreamDialect
from helix_dbos.stream.sql.storage import StreamStorage
from helix_dbos.testing.store_contract.helpers import commit, now, pending_call, start, tool_step
from tests.round_trips import counting
from tests.stream.helpers import contents, text


def _step(step: int, first: int) -> StepCommit:
    return StepCommit(
        session_id="s1",
        run_id="r1",
        step_count=step,
        first_sequence=first,
        messages=[AssistantMessage(content=f"step {step}")],
        custom_state={"n": step},
        now_ms=now(),
    )


def test_a_step_commit_is_one_round_trip(pg_store: SqlSessionStore) -> None:
    start(pg_store)
    with counting(pg_store.engine) as trips:
        assert commit(pg_store, 1, 1, tool_step("c1")).applied
    assert len(trips.on()) == 1 and trips.on()[0].startswith("WITH s AS")  # was BEGIN, the statement, COMMIT


def test_a_re_executed_commit_falls_back_and_answers_as_before(pg_store: SqlSessionStore) -> None:
    start(pg_store)
    first = pg_store.commit_step(_step(1, 1))
    with counting(pg_store.engine) as trips:
        again = pg_store.commit_step(_step(1, 1))
    assert first.applied and not again.applied and again.checkpoint_id == first.checkpoint_id
    sent = trips.on()
    assert sent[0].startswith("WITH s AS") and sent[1] == "BEGIN"  # the guard failed it; the transaction decides


def test_a_conflicting_commit_keeps_no_answer_marked_applied(store: SqlSessionStore) -> None:
    start(store)
    store.pending.register([pending_call("t1")])
    store.pending.submit("s1", "t1", {"approved": True})
    with pytest.raises(HelixError, match="Sequence gap"):
        commit(store, 1, 5, tool_step("t1"), applied_tool_call_ids=["t1"])  # the transcript has 1 message
    assert [c.status for c in store.pending.get("s1")] == ["answered"]
    assert commit(store, 1, 1, tool_step("t1"), applied_tool_call_ids=["t1"]).applied
    assert [c.status for c in store.pending.get("s1")] == ["applied"]


def test_riding_chunks_with_a_stored_key_fall_back_and_stay_contiguous(pg_store: SqlSessionStore) -> None:
    manager = SqlStreamManager(pg_store.engine)
    try:
        start(pg_store)
        manager.enqueue_keyed("s1", text("a"), "k1", run_id="r1")
        background_loop.run(manager.flush())
        # A replayed step re-sends k1 with the new k2: k1's reserved number must be given back.
        manager.enqueue_keyed("s1", text("a"), "k1", run_id="r1")
        manager.enqueue_keyed("s1", text("b"), "k2", run_id="r1")
        held = manager.hold_for_transaction("s1", pg_store.engine)
        assert held is not None and len(held) == 2
        writes = held.for_commit()
        assert isinstance(writes, RidingWrite)
        with counting(pg_store.engine) as trips:
            result = pg_store.commit_step_with(_step(1, 1), writes)
        held.release(stored=True)
        assert result.applied
        assert "BEGIN" in trips.on()  # the guard sent it to the transaction, which closed the hole
        records = background_loop.run(manager.read_records("s1"))
        assert [r.sequence for r in records] == [1, 2]
        assert contents([r.chunk for r in records]) == ["a", "b"]
        info = background_loop.run(manager.get_stream_info("s1"))
        assert info is not None and (info.latest_sequence, info.chunk_count) == (2, 2)
    finally:
        background_loop.run(manager.aclose())


def test_a_one_stream_batch_and_a_streams_end_are_one_round_trip_each(pg_store: SqlSessionStore) -> None:
    manager = SqlStreamManager(pg_store.engine)
    try:
        with counting(pg_store.engine) as trips:
            manager.enqueue_keyed("s1", text("a"), "k1", run_id="r1")
            background_loop.run(manager.flush())
            batch = trips.on()
            trips.clear()
            background_loop.run(manager.end_stream("s1"))
            end = trips.on()
        assert len(batch) == 1 and batch[0].startswith("WITH st AS")  # was BEGIN, the statement, COMMIT
        assert len(end) == 1 and end[0].startswith("INSERT INTO helix_streams") and "pg_notify" in end[0]  # was 4
        info = background_loop.run(manager.get_stream_info("s1"))
        assert info is not None and info.status == "ended" and info.latest_sequence == 1
    finally:
        background_loop.run(manager.aclose())


def _pending(stream_id: str, content: str, key: str | None = None, status: StreamStatus | None = None) -> PendingChunk:
    chunk = text(content, agent_id=stream_id)
    return PendingChunk(stream_id, "r1", chunk.type, None, storage_body(chunk), key, status, None)


def _storage(pg_store: SqlSessionStore) -> StreamStorage:
    return StreamStorage(PostgresStreamDialect(pg_store.engine, notify=True), RetryPolicy())


def _stored(storage: StreamStorage, stream_id: str) -> list[tuple[int, str]]:
    return [(r.sequence, contents([r.chunk])[0]) for r in storage.read_records(stream_id, 0)]


def test_a_batch_of_several_streams_is_one_round_trip(pg_store: SqlSessionStore) -> None:
    """Under load a flusher batch holds about 20 streams: one statement each in a transaction cost 22 round trips."""
    storage = _storage(pg_store)
    storage.write_groups({"s2": [_pending("s2", "x")]})  # s2 exists already, s1 and s3 do not
    url = pg_store.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    listener = psycopg.connect(url, autocommit=True)
    try:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        with counting(pg_store.engine) as trips:
            ended = storage.write_groups(
                {
                    "s3": [_pending("s3", "a")],
                    "s1": [_pending("s1", "a", "k1"), _pending("s1", "b")],
                    "s2": [_pending("s2", "y"), _pending("s2", "z")],
                }
            )
        assert ended == set()
        assert len(trips.on()) == 1 and trips.on()[0].startswith("WITH input AS")  # was BEGIN, 3 statements, COMMIT
        heard = {n.payload for n in listener.notifies(timeout=2.0, stop_after=3)}
    finally:
        listener.close()
    assert heard == {"c:s1", "c:s2", "c:s3"}  # each stream's live readers are woken
    assert _stored(storage, "s1") == [(1, "a"), (2, "b")]
    assert _stored(storage, "s2") == [(1, "x"), (2, "y"), (3, "z")]
    assert _stored(storage, "s3") == [(1, "a")]
    info = storage.info("s2")
    assert info is not None and (info.latest_sequence, info.chunk_count) == (3, 3)


def test_an_ended_stream_in_a_batch_gets_nothing_and_the_others_their_chunks(pg_store: SqlSessionStore) -> None:
    storage = _storage(pg_store)
    storage.write_groups({"s1": [_pending("s1", "a")], "s2": [_pending("s2", "a")]})
    storage.terminate("s2", "ended", None)
    with counting(pg_store.engine) as trips:
        ended = storage.write_groups({"s1": [_pending("s1", "b")], "s2": [_pending("s2", "late")]})
    assert ended == {"s2"} and len(trips.on()) == 1
    assert _stored(storage, "s1") == [(1, "a"), (2, "b")]
    assert _stored(storage, "s2") == [(1, "a")]
    info = storage.info("s2")
    assert info is not None and (info.status, info.latest_sequence) == ("ended", 1)


def test_a_batch_with_a_replayed_key_falls_back_whole_and_stays_contiguous(pg_store: SqlSessionStore) -> None:
    storage = _storage(pg_store)
    storage.write_groups({"s1": [_pending("s1", "a", "k1")], "s2": [_pending("s2", "a")]})
    with counting(pg_store.engine) as trips:
        ended = storage.write_groups(
            {"s1": [_pending("s1", "a", "k1"), _pending("s1", "b", "k2")], "s2": [_pending("s2", "b")]}
        )
    assert ended == set()
    sent = trips.on()
    assert sent[0].startswith("WITH input AS") and sent[1] == "BEGIN"  # the guard failed it: the transaction path
    assert _stored(storage, "s1") == [(1, "a"), (2, "b")]  # k1's second reservation given back
    assert _stored(storage, "s2") == [(1, "a"), (2, "b")]  # written once, by the transaction
    info = storage.info("s1")
    assert info is not None and (info.latest_sequence, info.chunk_count) == (2, 2)


def test_a_batch_that_switches_a_streams_status_keeps_the_transaction(pg_store: SqlSessionStore) -> None:
    storage = _storage(pg_store)
    with counting(pg_store.engine) as trips:
        storage.write_groups({"s1": [_pending("s1", "a", status="paused")], "s2": [_pending("s2", "a")]})
    assert trips.on()[0] == "BEGIN"
    info = storage.info("s1")
    assert info is not None and info.status == "paused"


def test_a_batch_locks_its_streams_in_the_order_the_transaction_path_does(pg_store: SqlSessionStore) -> None:
    """Byte order, whatever the database's collation: two flushers never wait on each other in a cycle."""
    storage = _storage(pg_store)
    with pg_store.engine.connect() as conn:
        statement = str(PostgresStreamDialect(pg_store.engine, notify=False)._append_groups)
        assert 'ORDER BY sid COLLATE "C"' in statement
        ordered = conn.exec_driver_sql(
            "SELECT s FROM unnest(ARRAY['b', 'B', 'a', '_x', 'A']) AS s ORDER BY s COLLATE \"C\""
        ).scalars()
        assert list(ordered) == sorted(["b", "B", "a", "_x", "A"])
    assert storage.write_groups({"B": [_pending("B", "a")], "a": [_pending("a", "a")]}) == set()


def _ending_manager(pg_store: SqlSessionStore, stream_id: str) -> SqlStreamManager:
    """A manager whose stream has a row and whose queued chunks wait for a hold (as a run's do)."""
    manager = SqlStreamManager(pg_store.engine, batch_max_delay=30)  # nothing flushed behind the test's back
    manager.enqueue_keyed(stream_id, text("first"), "r1:0", run_id="r1")
    background_loop.run(manager.flush())
    made_patient = manager.hold_for_transaction(stream_id, pg_store.engine)
    assert made_patient is not None and len(made_patient) == 0
    made_patient.release(stored=True)
    return manager


def _end_row(pg_store: SqlSessionStore, stream_id: str) -> tuple[str, int, int, int, str | None]:
    with pg_store.engine.connect() as conn:
        row = conn.exec_driver_sql(
            "SELECT status, latest_sequence, chunk_count, end_sequence, error FROM helix_streams WHERE stream_id = %s",
            (stream_id,),
        ).one()
    return (row[0], row[1], row[2], row[3], row[4])


@pytest.mark.parametrize("error", [None, "model exploded"])
def test_a_streams_last_chunks_and_its_end_are_one_round_trip(pg_store: SqlSessionStore, error: str | None) -> None:
    manager = _ending_manager(pg_store, "s1")
    try:
        manager.enqueue_keyed("s1", text("a"), "r1:1", run_id="r1")
        manager.enqueue_keyed("s1", text("b"), "r1:2", run_id="r1")
        with counting(pg_store.engine) as trips:
            manager.terminate_from_thread("s1", error)
        sent = trips.on()
        assert len(sent) == 1 and sent[0].startswith("WITH st AS"), sent  # was BEGIN, the append, the end, COMMIT
        records = background_loop.run(manager.read_records("s1"))
        assert [r.sequence for r in records] == [1, 2, 3]
        assert contents([r.chunk for r in records]) == ["first", "a", "b"]
        status = "ended" if error is None else "failed"
        assert _end_row(pg_store, "s1") == (status, 3, 3, 3, error)  # the end at the last chunk
    finally:
        background_loop.run(manager.aclose())


def test_a_replayed_last_chunk_ends_the_stream_through_the_transaction_as_before(pg_store: SqlSessionStore) -> None:
    manager = _ending_manager(pg_store, "s1")
    try:
        # A finalize step run again after a crash sends its closing chunk, stored the first time, again.
        manager.enqueue_keyed("s1", text("first"), "r1:0", run_id="r1")
        manager.enqueue_keyed("s1", text("a"), "r1:1", run_id="r1")
        with counting(pg_store.engine) as trips:
            manager.terminate_from_thread("s1")
        sent = trips.on()
        assert sent[0].startswith("WITH st AS") and sent[1] == "BEGIN"  # the guard failed it; nothing was written
        records = background_loop.run(manager.read_records("s1"))
        assert [r.sequence for r in records] == [1, 2] and contents([r.chunk for r in records]) == ["first", "a"]
        assert _end_row(pg_store, "s1") == ("ended", 2, 2, 2, None)  # the replay's reservation given back
    finally:
        background_loop.run(manager.aclose())


def test_an_ended_stream_is_not_changed_by_the_one_statement(pg_store: SqlSessionStore) -> None:
    storage = _storage(pg_store)
    storage.write_groups({"s1": [_pending("s1", "a")]})
    storage.terminate("s1", "ended", None)
    assert not storage.end_with_chunks_alone("s1", [_pending("s1", "late")], "failed", "boom")
    assert not storage.end_with_chunks_alone("nowhere", [_pending("nowhere", "x")], "ended", None)  # no row
    assert _end_row(pg_store, "s1") == ("ended", 1, 1, 1, None)
    assert _stored(storage, "s1") == [(1, "a")]
    assert storage.info("nowhere") is None
