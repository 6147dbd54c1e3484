"""A run's round trips to PostgreSQL: its start, each model call's commit and ``result()``, pinned.

Each round trip costs the client CPU (psycopg, and a GIL hand-over among the run threads), and the
server a little; under load a process is bound by the first (issue 32). The numbers below are what a
new session's run on the joint store and stream (as ``launch`` builds them) costs on helix-dbos's
own engine (DBOS's system database is DBOS's): the start reads the session once and writes in one
transaction; a step commit is one autocommitted statement, its chunks riding in it; ``result()``
reads the usage and whether the run delegated in one statement.
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
    assert result.status == "completed"

    # The start: the session read once (before, to plan the turn), then one transaction whose
    # insert of the new session is its own guard (no second read of the row).
    assert sum("FROM helix_sessions" in t for t in start) == 1
    assert start[0].startswith("SELECT") and "FROM helix_sessions" in start[0]
    assert start[1] == "BEGIN" and start[2].startswith("INSERT INTO helix_sessions") and start[-1] == "COMMIT"
    assert len(start) == 8  # read; BEGIN; session, stream read, message, run, stream; COMMIT (was 9)

    # Three model calls and the finalize, four commits: each one statement, no BEGIN or COMMIT
    # around it (was 3 round trips each).
    assert len(commits) == 4
    assert all(len(group) == 1 for group in commits), commits

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
    assert not any(t.startswith("SELECT") and "FROM helix_sessions" in t for t in start), start
    assert start[0] == "BEGIN" and start[1].startswith("INSERT INTO helix_sessions") and start[-1] == "COMMIT"
    assert len(start) == 7  # BEGIN; session, stream read, message, run, stream; COMMIT (was 8: the read first)
    # A second turn of that session still reads it (the turn to open comes from it).
    with counting(executor.store.engine) as trips:
        executor.execute(agent, "again", session_id=handle.session_id).result(timeout_seconds=60)
    assert any("FROM helix_sessions" in t for t in trips.on(caller))
