"""Garbage collection over real runs on PostgreSQL: the right rows of every table gone, live ones untouched.

A fleet (``fleet.py``) of old, recent, failed, multi-turn, parked (a client tool waiting) and
companion sessions runs through DBOS; ``collect_garbage`` then applies ``keep_days=7,
keep_failed_days=30, keep_last_runs=2``. The expected deletions are counted per table *before* the
collection, from what the test made (not from the planner), and compared with the report and with
the tables afterwards. The parked run and its stream are untouched and the run still completes
when its tool call is answered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from dbos import DBOS, DBOSClient

from helix_dbos.retention import DBOS_WORKFLOWS, DbosWorkflowRows, RetentionPolicy, RetentionSweeper, collect_garbage
from helix_dbos.retention.sweeper import GC_LOCK_KEY
from helix_dbos.runtime.launch import dbos_system_database_url
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.engine import now_ms
from helix_dbos.store.schema import messages, runs, sessions, stream_chunks, streams
from helix_dbos.stream.sql import SqlStreamManager
from tests.retention.fleet import (
    backdate,
    continue_session,
    database_bytes,
    dbos_counts,
    helix_counts,
    plain_agent,
    run_sessions,
    scripted_model,
)
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres

POLICY = RetentionPolicy(keep_days=7, keep_failed_days=30, keep_last_runs=2)


@pytest.fixture
def executor(make_executor: ExecutorFactory, runtime_db: str) -> Iterator[Any]:
    engine = sa.create_engine(runtime_db.replace("postgresql://", "postgresql+psycopg://", 1))
    manager = SqlStreamManager(engine)
    yield make_executor(scripted_model(), [plain_agent], stream_manager=manager)
    manager.close()
    engine.dispose()


def _wait_for(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def _workflow_ids(engine: sa.Engine, where: sa.ColumnElement[bool]) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.select(runs.c.workflow_id).where(where))]


def _build_fleet(executor: Any, prefix: str, scale: int) -> dict[str, Any]:
    """Make the fleet; return its parts and the rows the policy must delete, counted per table."""
    store: SqlSessionStore = executor.store
    engine = store.engine
    old = run_sessions(executor, ["hello"] * (4 * scale), prefix=f"{prefix}-old")
    multi = run_sessions(executor, ["hello"] * (2 * scale), prefix=f"{prefix}-multi")
    for sid in multi:
        continue_session(executor, sid, "again")
        continue_session(executor, sid, "and again")
    recent = run_sessions(executor, ["hello"] * (2 * scale), prefix=f"{prefix}-recent")
    failed_kept = run_sessions(executor, ["please fail"] * scale, prefix=f"{prefix}-failkept")
    failed_gone = run_sessions(executor, ["please fail"] * scale, prefix=f"{prefix}-failgone")
    # A companion's live session: an old parent whose child session is open (created, not finished).
    parent = run_sessions(executor, ["hello"], prefix=f"{prefix}-parent")[0]
    child = f"{prefix}-companion"
    store.create_session(
        child,
        agent_type=plain_agent.name,
        custom_state={},
        now_ms=now_ms(),
        parent_session_id=parent,
        root_session_id=parent,
    )
    # A parked run: an old finished turn, then a turn waiting for a client tool's answer.
    parked = run_sessions(executor, ["hello"], prefix=f"{prefix}-parked")[0]
    backdate(engine, [parked], 100)
    parked_handle = executor.execute(plain_agent, "ask where I am", session_id=parked)
    _wait_for(lambda: [c.tool_call_id for c in executor.list_pending_tool_calls(parked)] != [])
    backdate(engine, old, 10)
    backdate(engine, failed_kept, 10)
    backdate(engine, failed_gone, 40)
    backdate(engine, [parent], 100)

    with engine.connect() as conn:
        first_turns = [
            r[0] for r in conn.execute(sa.select(runs.c.run_id).where(runs.c.session_id.in_(multi), runs.c.turn == 1))
        ]
    whole = old + failed_gone

    def gone(table: sa.Table) -> sa.ColumnElement[bool]:
        if table is streams or table is stream_chunks:
            by_session = table.c.stream_id.in_(whole)
            return by_session | table.c.run_id.in_(first_turns) if table is stream_chunks else by_session
        if table is sessions:
            return table.c.session_id.in_(whole)
        if table is messages:  # a session that lives on keeps its whole transcript
            return table.c.session_id.in_(whole)
        if "run_id" in table.c:
            return table.c.session_id.in_(whole) | table.c.run_id.in_(first_turns)
        return table.c.session_id.in_(whole)

    expected = helix_counts(engine, gone)
    expected_workflows = _workflow_ids(engine, runs.c.session_id.in_(whole) | runs.c.run_id.in_(first_turns))
    return {
        "whole": whole,
        "first_turns": first_turns,
        "multi": multi,
        "kept": recent + failed_kept + [parent, child],
        "parked": parked,
        "parked_handle": parked_handle,
        "expected": expected,
        "expected_workflows": expected_workflows,
    }


def _gc(runtime_db: str, engine: sa.Engine, **kwargs: Any) -> Any:
    client = DBOSClient(system_database_url=dbos_system_database_url(runtime_db))
    try:
        return collect_garbage(engine, POLICY, DbosWorkflowRows(client), now_ms=now_ms(), batch_size=7, **kwargs)
    finally:
        client.destroy()


def _check_collection(executor: Any, runtime_db: str, scale: int) -> None:
    fleet = _build_fleet(executor, f"gc{scale}-{time.monotonic_ns()}", scale)
    try:
        _collect_and_check(executor, runtime_db, scale, fleet)
    finally:  # a failed check must not leave the parked run waiting on DBOS's threads at exit
        for call in executor.list_pending_tool_calls(fleet["parked"]):
            executor.submit_tool_result(
                fleet["parked"], {"kind": "client-tool-result", "tool_call_id": call.tool_call_id, "result": "x"}
            )


def _collect_and_check(executor: Any, runtime_db: str, scale: int, fleet: dict[str, Any]) -> None:
    engine = executor.store.engine
    parked = fleet["parked"]

    def in_parked(t: sa.Table) -> sa.ColumnElement[bool]:
        column = t.c.stream_id if "stream_id" in t.c and "session_id" not in t.c else t.c.session_id
        return column == parked

    parked_before = helix_counts(engine, in_parked)
    before = helix_counts(engine)
    dbos_before = dbos_counts(engine)
    bytes_before = database_bytes(engine)

    dry = _gc(runtime_db, engine, dry_run=True)
    assert helix_counts(engine) == before  # a dry run deletes nothing ...
    report = _gc(runtime_db, engine)

    after = helix_counts(engine)
    deleted = {name: before[name] - after[name] for name in before}
    assert deleted == fleet["expected"], "rows deleted per helix table"
    assert {k: report.deleted[k] for k in deleted} == fleet["expected"], "the report's counts"
    assert {k: dry.deleted[k] for k in deleted} == fleet["expected"], "... and says what would go"
    assert report.sessions_deleted == len(fleet["whole"])
    assert report.runs_deleted == len(fleet["first_turns"])
    # DBOS: every row of the expired runs' workflows, and nothing else.
    assert report.deleted[DBOS_WORKFLOWS] == len(fleet["expected_workflows"])
    assert dbos_counts(engine, fleet["expected_workflows"]) == dict.fromkeys(dbos_before, 0)
    dbos_after = dbos_counts(engine)
    assert dbos_after["dbos.workflow_status"] == dbos_before["dbos.workflow_status"] - len(fleet["expected_workflows"])
    # A second collection (another worker, or the next round) finds nothing left to do.
    again = _gc(runtime_db, engine)
    assert sum(again.deleted.values()) == 0 and helix_counts(engine) == after
    print(f"\nscale {scale}: deleted {report.deleted}; database {bytes_before} -> {database_bytes(engine)} bytes")

    # Sessions that live on keep every message and their latest runs; kept sessions keep everything.
    with engine.connect() as conn:
        counted = conn.execute(
            sa.select(streams.c.stream_id, streams.c.chunk_count).where(streams.c.stream_id.in_(fleet["multi"]))
        ).all()
        stored = conn.execute(
            sa.select(stream_chunks.c.stream_id, sa.func.count())
            .where(stream_chunks.c.stream_id.in_(fleet["multi"]))
            .group_by(stream_chunks.c.stream_id)
        ).all()
    assert {r[0]: r[1] for r in counted} == {
        r[0]: r[1] for r in stored
    }  # a stream that lives on still counts its chunks right
    for sid in fleet["multi"][:3]:
        assert [r.turn for r in executor.store.list_runs(sid)] == [2, 3]
        assert executor.store.get_message_count(sid) == len(executor.store.get_messages(sid, limit=1000).messages)
    for sid in fleet["kept"]:
        assert executor.store.load_session(sid) is not None
    # The parked run and its stream: untouched, and it still completes.
    assert helix_counts(engine, in_parked) == parked_before
    handle = fleet["parked_handle"]
    assert DBOS.get_workflow_status(handle.workflow_id) is not None
    (call,) = executor.list_pending_tool_calls(parked)
    executor.submit_tool_result(
        parked, {"kind": "client-tool-result", "tool_call_id": call.tool_call_id, "result": {"city": "Oslo"}}
    )
    assert handle.result().status == "completed"

    # Once the parked session has finished, its old turn is past the policy like any other.
    later = _gc(runtime_db, engine)
    assert later.runs_deleted == 1 and later.sessions_deleted == 0


def test_gc_deletes_exactly_what_the_policy_says(executor: Any, runtime_db: str) -> None:
    _check_collection(executor, runtime_db, scale=5)  # 14 x 5 + 3 = 73 runs


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_gc_over_a_thousand_runs(executor: Any, runtime_db: str) -> None:
    _check_collection(executor, runtime_db, scale=72)  # 14 x 72 + 3 = 1,011 runs


def test_gc_during_load_fails_no_run(executor: Any, runtime_db: str) -> None:
    """Collections every few milliseconds while sessions run turn after turn: every run completes."""
    engine = executor.store.engine
    prefix = f"load-{time.monotonic_ns()}"
    old = run_sessions(executor, ["hello"] * 10, prefix=f"{prefix}-old")
    backdate(engine, old, 30)
    stop = threading.Event()
    rounds: list[Any] = []
    errors: list[BaseException] = []

    def collector() -> None:
        policy = RetentionPolicy(keep_days=7, keep_last_runs=1)
        client = DBOSClient(system_database_url=dbos_system_database_url(runtime_db))
        try:
            while not stop.is_set():
                rounds.append(collect_garbage(engine, policy, DbosWorkflowRows(client), now_ms=now_ms(), batch_size=5))
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.destroy()

    thread = threading.Thread(target=collector)
    thread.start()
    results: list[str] = []
    try:
        sessions_ = run_sessions(executor, ["hello"] * 6, prefix=f"{prefix}-live")
        for turn in range(3):
            handles = [executor.execute(plain_agent, f"turn {turn}", session_id=sid) for sid in sessions_]
            results.extend(h.result().status for h in handles)
    finally:
        stop.set()
        thread.join(30)
    assert errors == []
    assert results == ["completed"] * 18
    assert len(rounds) >= 2
    assert all(executor.store.load_session(sid) is None for sid in old)
    assert sum(r.runs_deleted for r in rounds) > 0
    for sid in sessions_:
        assert executor.store.load_session(sid) is not None


def test_sweepers_collect_in_the_background_one_at_a_time(executor: Any, runtime_db: str) -> None:
    """Two workers' sweepers: while one holds the collection lock the other skips its round."""
    engine = executor.store.engine
    old = run_sessions(executor, ["hello"] * 3, prefix=f"sweep-{time.monotonic_ns()}")
    backdate(engine, old, 400)
    policy = RetentionPolicy(keep_days=365)
    first = RetentionSweeper(runtime_db, policy, DbosWorkflowRows(DBOS), every_seconds=0.05)
    second = RetentionSweeper(engine, policy, DbosWorkflowRows(DBOS), every_seconds=60)
    with engine.connect() as holder:
        holder.execution_options(isolation_level="AUTOCOMMIT")
        holder.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": GC_LOCK_KEY})  # another worker's round
        try:
            first.start()
            time.sleep(0.5)
            assert first.rounds == 0 and second.run_once() is None
            assert all(executor.store.load_session(sid) is not None for sid in old)
        finally:
            holder.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": GC_LOCK_KEY})
    try:
        _wait_for(lambda: first.rounds >= 1)
        assert all(executor.store.load_session(sid) is None for sid in old)
        assert first.last_report is not None and first.last_report.sessions_deleted >= 3
    finally:
        first.stop()
    assert DBOS.get_workflow_status(f"{old[0]}-turn-1") is None
