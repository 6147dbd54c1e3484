"""A run's start is one transaction when the durable stream shares the store's database.

Starting a run used to cost three: a read of the stream's latest sequence (the run's first
sequence), the store's ``start_run`` and the stream's activation. The stream's part now rides in
``start_run_with``'s transaction, and a new session's start is one statement with the stream's
read and activation in it. What must not change: the run's recorded first sequence, the stream
being active before the workflow writes, and a repeated request activating nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SqlSessionStore, define_agent
from helix_dbos.runtime.aio import background_loop
from helix_dbos.step_result import TextStepResult
from helix_dbos.store.base import StartRun
from helix_dbos.stream.sql import SqlStreamManager

pytestmark = pytest.mark.postgres

agent = define_agent("joint-start", system_prompt="Answer.", llm_config="scripted/joint")
Factory = Callable[[int], tuple[DBOSAgentExecutor, SqlStreamManager]]


def answers(n: int) -> MockLLMAdapter:
    return MockLLMAdapter([TextStepResult(content=f"a{i}", should_stop=True, stop_reason="end_turn") for i in range(n)])


@pytest.fixture
def make(runtime_db: str) -> Iterator[Factory]:
    """Executors whose stream manager shares the store's engine (as ``launch`` builds them)."""
    made: list[tuple[DBOSAgentExecutor, SqlStreamManager]] = []

    def factory(turns: int) -> tuple[DBOSAgentExecutor, SqlStreamManager]:
        store = SqlSessionStore(runtime_db)
        manager = SqlStreamManager(store.engine)
        executor = DBOSAgentExecutor(store, llm_adapter=answers(turns), agents=[agent], stream_manager=manager)
        made.append((executor, manager))
        return executor, manager

    yield factory
    for executor, manager in made:
        executor.close()
        background_loop.run(manager.aclose())
        executor.store.close()


class Trace:
    """Every statement and commit on an engine, with the connection (DBAPI) that ran it."""

    def __init__(self, engine: sa.Engine) -> None:
        self.events: list[tuple[str, int, str]] = []
        self._lock = threading.Lock()
        sa.event.listen(engine, "before_cursor_execute", self._statement)
        sa.event.listen(engine, "commit", self._commit)

    def _statement(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        with self._lock:
            self.events.append(("sql", id(conn.connection.dbapi_connection), " ".join(statement.split())))

    def _commit(self, conn: Any) -> None:
        with self._lock:
            self.events.append(("commit", id(conn.connection.dbapi_connection), ""))

    def transaction_of(self, prefix: str) -> list[str]:
        """The statements of the transaction (on one connection, between two commits) holding ``prefix``."""
        at = next(i for i, (kind, _, text) in enumerate(self.events) if kind == "sql" and text.startswith(prefix))
        conn = self.events[at][1]
        mine = [(i, kind, text) for i, (kind, c, text) in enumerate(self.events) if c == conn]
        pos = next(j for j, (i, _, _) in enumerate(mine) if i == at)
        start = max((j for j, (_, kind, _) in enumerate(mine[:pos]) if kind == "commit"), default=-1) + 1
        end = next((j for j, (_, kind, _) in enumerate(mine[pos:], pos) if kind == "commit"), len(mine))
        return [text for _, kind, text in mine[start:end] if kind == "sql"]


def test_a_new_sessions_start_reads_and_activates_the_stream_in_its_one_statement(make: Factory) -> None:
    executor, _ = make(1)
    trace = Trace(executor.store.engine)
    handle = executor.execute(agent, "hi", session_id="joint-start-1")
    assert handle.result(timeout_seconds=60).status == "completed"

    start = [t for _, _, t in trace.events if "INSERT INTO helix_runs" in t]
    assert len(start) == 1 and start[0].startswith("WITH new_session AS")
    assert "SELECT latest_sequence FROM helix_streams" in start[0]
    assert "INSERT INTO helix_streams" in start[0] and "activation" in start[0]
    upto = next(i for i, e in enumerate(trace.events) if "INSERT INTO helix_runs" in e[2])
    reads = [t for _, _, t in trace.events[:upto] if "FROM helix_streams" in t]
    assert reads == []  # no read of its own before it


def test_the_stream_is_read_and_activated_in_a_next_turns_start_transaction(make: Factory) -> None:
    executor, _ = make(2)
    first = executor.execute(agent, "one", session_id="joint-start-4")
    assert first.result(timeout_seconds=60).status == "completed"
    trace = Trace(executor.store.engine)
    handle = executor.execute(agent, "two", session_id="joint-start-4")
    assert handle.result(timeout_seconds=60).status == "completed"

    start = trace.transaction_of("INSERT INTO helix_runs")
    assert any(s.startswith("SELECT status, latest_sequence, chunk_count FROM helix_streams") for s in start)
    assert any(s.startswith("INSERT INTO helix_streams") and "activation" in s for s in start)
    upto = next(i for i, e in enumerate(trace.events) if e[2].startswith("INSERT INTO helix_runs"))
    reads = [t for _, _, t in trace.events[:upto] if t.startswith("SELECT status, latest_sequence")]
    assert len(reads) == 1  # the one in the start transaction: no read of its own before it


def test_the_next_turn_starts_at_the_streams_latest_sequence(make: Factory) -> None:
    executor, manager = make(2)
    first = executor.execute(agent, "one", session_id="joint-start-2")
    assert first.result(timeout_seconds=60).status == "completed"
    deadline = time.monotonic() + 30
    info = background_loop.run(manager.get_stream_info("joint-start-2"))
    while (info is None or info.status != "ended") and time.monotonic() < deadline:  # the end is asynchronous
        time.sleep(0.02)
        info = background_loop.run(manager.get_stream_info("joint-start-2"))
    assert info is not None and info.status == "ended" and info.latest_sequence > 0

    second = executor.execute(agent, "two", session_id="joint-start-2")
    assert second.result(timeout_seconds=60).status == "completed"
    runs = executor.store.list_runs("joint-start-2")
    assert [r.stream_start_sequence for r in runs] == [0, info.latest_sequence]
    records = background_loop.run(manager.read_records("joint-start-2", after_sequence=info.latest_sequence))
    assert [r.chunk.type for r in records][-1] == "output"  # the second turn's chunks follow the first's


def test_a_repeated_start_reads_under_the_lock_and_activates_nothing(runtime_db: str) -> None:
    store = SqlSessionStore(runtime_db)
    try:
        start = StartRun(
            session_id="joint-start-3",
            run_id="joint-start-3-r1",
            workflow_id="joint-start-3-r1",
            agent_type=agent.name,
            new_session_state={},
            input_messages=[],
            request_key="k",
            now_ms=1,
        )
        activated: list[int] = []
        first = store.start_run_with(start, lambda conn: 7, lambda conn: activated.append(1))
        assert first.run.stream_start_sequence == 7 and not first.existing and activated == [1]
        again = store.start_run_with(start, lambda conn: 9, lambda conn: activated.append(2))
        assert again.existing and again.run.stream_start_sequence == 7
        assert activated == [1]  # a repeated request opens nothing
    finally:
        store.close()
