"""A run's round trips to PostgreSQL: its start, each model call's commit and ``result()``, pinned.

Each round trip costs the client CPU (psycopg, and a GIL hand-over among the run threads), and the
server a little; under load a process is bound by the first (issue 32). The numbers below are what a
new session's run on the joint store and stream (as ``launch`` builds them) costs on helix-dbos's
own engine (DBOS's system database is DBOS's): the start is one autocommitted statement (the
session, its input, the run, the stream's start), with no read before it; a step commit is one
autocommitted statement, its chunks riding in it; the run's closing chunks and its stream's end are
one statement; ``result()`` reads the usage and whether the run delegated in one statement. A start
on an existing session pays that statement, failed, on top of the transaction path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SqlSessionStore, define_agent, define_tool
from helix_dbos.runtime.aio import background_loop
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.stream.sql import SqlStreamManager
from tests.round_trips import counting

pytestmark = pytest.mark.postgres

agent = define_agent(
    "round-trips",
    system_prompt="Call tools.",
    llm_config="scripted/trips",
    tools=[define_tool("noop", execute=lambda inp, ctx: {"ok": True})],
)
Factory = Callable[[MockLLMAdapter], tuple[DBOSAgentExecutor, SqlStreamManager]]


def script(tools: int) -> MockLLMAdapter:
    steps: list[Any] = [
        ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id=f"c{i}", name="noop", arguments={"i": i})], stop_reason="tool_use"
        )
        for i in range(tools)
    ]
    return MockLLMAdapter([*steps, TextStepResult(content="done", should_stop=True, stop_reason="end_turn")])


@pytest.fixture
def make(runtime_db: str) -> Iterator[Factory]:
    """Executors whose stream manager shares the store's engine (as ``launch`` builds them)."""
    made: list[tuple[DBOSAgentExecutor, SqlStreamManager]] = []

    def factory(model: MockLLMAdapter) -> tuple[DBOSAgentExecutor, SqlStreamManager]:
        store = SqlSessionStore(runtime_db)
        manager = SqlStreamManager(store.engine)
        executor = DBOSAgentExecutor(store, llm_adapter=model, agents=[agent], stream_manager=manager)
        made.append((executor, manager))
        return executor, manager

    yield factory
    for executor, manager in made:
        executor.close()
        background_loop.run(manager.aclose())
        executor.store.close()


def test_a_runs_start_commits_and_result_cost_the_fewest_round_trips(make: Factory) -> None:
    executor, _ = make(script(2))
    caller = threading.current_thread().name
    with counting(executor.store.engine) as trips:
        handle = executor.execute(agent, "go", session_id="round-trips-1")
        start = trips.on(caller)
        trips.clear()
        result = handle.result(timeout_seconds=60)
        reads = trips.on(caller)
        commits = trips.transactions_with("WITH s AS")
        stream_writes = trips.transactions_with("WITH st AS")
    assert result.status == "completed"

    # The start: one autocommitted statement, the session insert its guard (was 8 round trips: the
    # session read; BEGIN; session, stream read, message, run, stream activation; COMMIT).
    assert len(start) == 1, start
    assert start[0].startswith("WITH new_session AS ( INSERT INTO helix_sessions")
    assert "INSERT INTO helix_runs" in start[0] and "INSERT INTO helix_streams" in start[0]

    # Three model calls and the finalize, four commits: each one statement, no BEGIN or COMMIT
    # around it (was 3 round trips each).
    assert len(commits) == 4
    assert all(len(group) == 1 for group in commits), commits

    # The stream's writes outside the commits, its closing chunks and its end among them: each one
    # statement (the end with the chunks still held was BEGIN, the append, the end, COMMIT).
    assert stream_writes and all(len(group) == 1 for group in stream_writes), stream_writes

    # result(): the usage and whether the run delegated, in one statement (was 2).
    assert len(reads) == 1 and "helix_usage" in reads[0] and "helix_sub_session_refs" in reads[0]
    assert result.usage is not None


def test_a_start_that_makes_its_session_id_reads_no_session(make: Factory) -> None:
    """No ``session_id`` and no idempotency key: the id is a new UUID, so no session to read first."""
    executor, _ = make(script(0))
    caller = threading.current_thread().name
    with counting(executor.store.engine) as trips:
        handle = executor.execute(agent, "go")
        start = trips.on(caller)
    assert handle.result(timeout_seconds=60).status == "completed"
    assert len(start) == 1 and start[0].startswith("WITH new_session AS ( INSERT INTO helix_sessions"), start  # (was 7)
    # A second turn of that session still reads it (the turn to open comes from it).
    with counting(executor.store.engine) as trips:
        executor.execute(agent, "again", session_id=handle.session_id).result(timeout_seconds=60)
    assert any("FROM helix_sessions" in t for t in trips.on(caller))


def test_a_second_turn_pays_the_failed_statement_and_the_transaction_path_unchanged(make: Factory) -> None:
    """An existing session: the one statement fails whole (nothing written), then the path of before."""
    done = TextStepResult(content="done", should_stop=True, stop_reason="end_turn")
    executor, _ = make(MockLLMAdapter([done, done]))
    caller = threading.current_thread().name
    first = executor.execute(agent, "go", session_id="round-trips-2")
    assert first.result(timeout_seconds=60).status == "completed"
    with counting(executor.store.engine) as trips:
        handle = executor.execute(agent, "again", session_id="round-trips-2")
        start = trips.on(caller)
    assert handle.result(timeout_seconds=60).status == "completed"
    assert start[0].startswith("WITH new_session AS ( INSERT INTO helix_sessions")  # the guess, failed by its guard
    before = start[1:]  # what a second turn cost before: 11 round trips
    assert before[0].startswith("SELECT") and "FROM helix_sessions" in before[0]
    assert before[2] == "BEGIN" and before[-1] == "COMMIT"
    assert len(before) == 11, before
    runs = executor.store.list_runs("round-trips-2")
    assert [(r.turn, r.status, r.start_sequence) for r in runs] == [(1, "completed", 0), (2, "completed", 2)]
