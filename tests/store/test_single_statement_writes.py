"""Writes that are one statement run outside a transaction on PostgreSQL, and fall back whole when they cannot.

A step commit (with the run's chunks riding in it), a flusher batch of one stream and a stream's end
are each one statement in the common case: autocommitted, they cost one round trip instead of three
(``BEGIN`` and ``COMMIT`` are round trips of their own). A commit or batch that is not the common
case (a replayed chunk whose hole must be closed under the row lock, a conflict that must not keep
its answers marked applied) fails its one statement whole, by a guard, and runs in a transaction as
before. These pin both halves: the round trips, and that the fallback leaves what it always left.
"""

from __future__ import annotations

import pytest

from helix_dbos.errors import HelixError
from helix_dbos.messages import AssistantMessage
from helix_dbos.runtime.aio import background_loop
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.base import StepCommit
from helix_dbos.store.dialect import RidingWrite
from helix_dbos.stream.sql import SqlStreamManager
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
