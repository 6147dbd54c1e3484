"""A run's stream chunks ride in its step commits when the stream shares the store's engine.

The chunks workflow code writes between two step commits (checkpoint, tool start and end, ...)
are stored in the next commit's transaction instead of costing the flusher a transaction of its
own; the stream's last chunks go with its end. What readers see is unchanged: every chunk once, in
order, and a chunk written before a slow tool is still visible while the tool runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SqlSessionStore, define_agent, define_tool
from helix_dbos.runtime.aio import background_loop
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.stream.sql import SqlStreamManager

pytestmark = pytest.mark.postgres

seen_while_running: list[bool] = []
Factory = Callable[[MockLLMAdapter, float], tuple[DBOSAgentExecutor, SqlStreamManager]]


def slow(inp: dict[str, Any], ctx: object) -> dict[str, Any]:
    """Waits until its own tool_start is stored (by the flusher, not a commit), then returns."""
    engine = sa.create_engine(str(inp["url"]))
    try:
        deadline = time.monotonic() + 5
        found = False
        while not found and time.monotonic() < deadline:
            with engine.connect() as conn:
                found = bool(
                    conn.execute(
                        sa.text("SELECT 1 FROM helix_stream_chunks WHERE stream_id = :sid AND type = 'tool_start'"),
                        {"sid": inp["sid"]},
                    ).first()
                )
            time.sleep(0.02)
        seen_while_running.append(found)
    finally:
        engine.dispose()
    return {"ok": True}


agent = define_agent(
    "chunks-with-commits",
    system_prompt="Call tools.",
    llm_config="scripted/chunks",
    tools=[
        define_tool("noop", execute=lambda inp, ctx: {"ok": True}),
        define_tool("slow", execute=slow),
    ],
)


def script(calls: list[tuple[str, dict[str, Any]]]) -> MockLLMAdapter:
    steps: list[Any] = [
        ToolCallsStepResult(tool_calls=[ParsedToolCall(id=f"c{i}", name=name, arguments=args)], stop_reason="tool_use")
        for i, (name, args) in enumerate(calls)
    ]
    return MockLLMAdapter([*steps, TextStepResult(content="done", should_stop=True, stop_reason="end_turn")])


@pytest.fixture
def make(runtime_db: str) -> Iterator[Callable[[MockLLMAdapter, float], tuple[DBOSAgentExecutor, SqlStreamManager]]]:
    """Executors whose stream manager shares the store's engine (as ``launch`` builds them)."""
    made: list[tuple[DBOSAgentExecutor, SqlStreamManager]] = []

    def factory(model: MockLLMAdapter, delay: float) -> tuple[DBOSAgentExecutor, SqlStreamManager]:
        store = SqlSessionStore(runtime_db)
        manager = counting_manager(store, delay)
        executor = DBOSAgentExecutor(store, llm_adapter=model, agents=[agent], stream_manager=manager)
        made.append((executor, manager))
        return executor, manager

    yield factory
    for executor, manager in made:
        executor.close()
        background_loop.run(manager.aclose())
        executor.store.close()


batches: list[int] = []
"""Sizes of the batches the flusher committed itself."""


def counting_manager(store: SqlSessionStore, delay: float) -> SqlStreamManager:
    batches.clear()
    manager = SqlStreamManager(store.engine, batch_max_delay=delay)
    flusher = manager._flusher
    commit = flusher._commit
    lock = threading.Lock()

    def counting(batch: list[Any]) -> None:
        with lock:
            batches.append(len(batch))
        commit(batch)

    flusher._commit = counting  # type: ignore[method-assign]
    return manager


def test_the_chunks_of_a_run_cost_no_stream_transaction_of_their_own(make: Factory) -> None:
    model = script([("noop", {"i": i}) for i in range(4)])
    # A window far longer than the run: only commits (and the stream's end) can store the chunks.
    executor, manager = make(model, 30.0)
    handle = executor.execute(agent, "go")
    assert handle.result(timeout_seconds=60).status == "completed"

    assert batches == []  # the flusher committed nothing: every chunk went with a commit or the end
    records = background_loop.run(manager.read_records(handle.session_id))
    types = [r.chunk.type for r in records]
    per_tool = ["checkpoint_created", "tool_start", "tool_end"]
    assert types == [*(per_tool * 4), "text_delta", "checkpoint_created", "checkpoint_created", "output"]
    assert [r.sequence for r in records] == list(range(records[0].sequence, records[0].sequence + len(records)))


def test_a_chunk_written_before_a_slow_tool_is_stored_while_the_tool_runs(make: Factory, runtime_db: str) -> None:
    seen_while_running.clear()
    session_id = "chunks-slow-tool"
    model = script([("slow", {"url": runtime_db, "sid": session_id})])
    executor, manager = make(model, 0.05)
    handle = executor.execute(agent, "go", session_id=session_id)
    assert handle.result(timeout_seconds=60).status == "completed"
    assert seen_while_running == [True]  # the flusher stored it after its window, as before
    assert batches  # ... which is the flusher's transaction, not a commit's
    records = background_loop.run(manager.read_records(handle.session_id))
    assert [r.chunk.type for r in records].count("tool_start") == 1


def test_a_step_commit_and_its_chunks_are_one_statement_on_postgresql(make: Factory) -> None:
    """The chunks' upsert and insert ride in the commit's own CTE: one round trip per step, not two.

    Only the stream's end stores its last chunks with a statement of its own (with the end itself).
    """
    model = script([("noop", {"i": i}) for i in range(4)])
    executor, manager = make(model, 30.0)
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement.lstrip())

    sa.event.listen(executor.store.engine, "before_cursor_execute", record)
    try:
        handle = executor.execute(agent, "go")
        assert handle.result(timeout_seconds=60).status == "completed"
    finally:
        sa.event.remove(executor.store.engine, "before_cursor_execute", record)
    commits = [s for s in statements if s.startswith("WITH s AS")]
    assert len(commits) == 6  # five model calls and the finalize
    assert sum("INSERT INTO helix_stream_chunks" in s for s in commits) == 5  # all but the first carry chunks
    standalone = [s for s in statements if s.startswith("WITH st AS")]
    assert len(standalone) == 1  # the stream's end
    records = background_loop.run(manager.read_records(handle.session_id))
    assert [r.sequence for r in records] == list(range(records[0].sequence, records[0].sequence + len(records)))
