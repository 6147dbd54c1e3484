"""Start-up and shutdown at scale (issue 9, item 10), on PostgreSQL with ``launch()`` / ``shutdown()``.

- Orphan detection reads the runs in flight only (an indexed query, paged by run id): launch costs
  the same with 0 or 2,000 parked sessions, and an orphan older than any page is still found.
- ``shutdown()`` drains: a run whose session already reads ``completed`` finishes recording in
  DBOS before DBOS stops, and nothing is logged from workflow threads after it stopped; a run
  still waiting when the drain ends stays recoverable.

Each test launches DBOS on a database of its own (no module-wide DBOS here).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import BaseModel

from helix_dbos import AgentHooks, LLMGenerateInput, ToolResultMessage, define_agent, define_tool, upgrade
from helix_dbos.messages import UserMessage
from helix_dbos.runtime.launch import launch, shutdown
from helix_dbos.step_result import ParsedToolCall, StepResult, TextStepResult, ToolCallsStepResult
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.base import StartRun
from helix_dbos.store.schema import runs, sessions
from tests.pg import create_database, drop_database, unique_name

pytestmark = pytest.mark.postgres

NOISE = "System database accessed before DBOS was launched"


class CityIn(BaseModel):
    city: str


class ToolThenText:
    """Calls ``tool`` once (with a city), then ends with text: decided from the transcript alone."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        if not any(isinstance(m, ToolResultMessage) for m in input.messages):
            call = ParsedToolCall(id="c1", name=self.tool, arguments={"city": "Lima"})
            return ToolCallsStepResult(tool_calls=[call], stop_reason="tool_use")
        return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")


def _start_only(store: SqlSessionStore, session_id: str, agent: str, now: int) -> None:
    """Record a run as ``execute`` does, and nothing else: an orphan (its workflow never starts)."""
    run_id = f"{session_id}-turn-1"
    store.start_run(
        StartRun(
            session_id=session_id,
            run_id=run_id,
            workflow_id=run_id,
            agent_type=agent,
            new_session_state={},
            input_messages=[UserMessage(content="Weather in Lima?")],
            now_ms=now,
        )
    )


def _add_parked_sessions(store: SqlSessionStore, count: int, agent: str) -> None:
    """``count`` sessions parked on a human (session ``active``, run ``suspended``).

    One is made through the store; the rest are copies of its rows inserted in one transaction
    (making 2,000 one by one would cost the test ten seconds and prove nothing more).
    """
    template = "parked-template"
    _start_only(store, template, agent, now=10)
    store.finish_run(template, f"{template}-turn-1", session_status="active", run_status="suspended", now_ms=10)
    with store.engine.begin() as conn:
        session_row = dict(conn.execute(sa.select(sessions).where(sessions.c.session_id == template)).one()._mapping)
        run_row = dict(conn.execute(sa.select(runs).where(runs.c.session_id == template)).one()._mapping)
        new_sessions, new_runs = [], []
        for i in range(count - 1):
            sid = f"parked-{i:05d}"
            new_sessions.append({**session_row, "session_id": sid, "stream_id": sid, "run_id": f"{sid}-turn-1"})
            new_runs.append({**run_row, "session_id": sid, "run_id": f"{sid}-turn-1", "workflow_id": f"{sid}-turn-1"})
        if new_sessions:
            conn.execute(sessions.insert(), new_sessions)
            conn.execute(runs.insert(), new_runs)


@contextmanager
def _count_statements(engine: sa.Engine) -> Iterator[list[str]]:
    """The statements this thread sends on ``engine``: the engine is shared with the durable stream,
    whose flusher thread may still be writing (and notifying) in the background."""
    seen: list[str] = []
    me = threading.get_ident()

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if threading.get_ident() == me:
            seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def _workflow_statuses(url: str, workflow_ids: list[str]) -> dict[str, str]:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT workflow_uuid, status FROM dbos.workflow_status WHERE workflow_uuid = ANY(:ids)"),
                {"ids": workflow_ids},
            )
            return {r.workflow_uuid: r.status for r in rows}
    finally:
        engine.dispose()


def _wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_list_running_runs_pages_through_running_runs_only(store: SqlSessionStore) -> None:
    for i, status in enumerate(["running", "suspended", "running", "completed", "running", "running", "failed"]):
        sid = f"s{i}"
        _start_only(store, sid, "a", now=i)
        if status != "running":
            session_status = "active" if status == "suspended" else status
            store.finish_run(sid, f"{sid}-turn-1", session_status=session_status, run_status=status, now_ms=i)
    seen: list[str] = []
    after = None
    while page := store.list_running_runs(after_run_id=after, limit=2):
        assert len(page) <= 2
        seen += [r.run_id for r in page]
        after = page[-1].run_id
    assert seen == ["s0-turn-1", "s2-turn-1", "s4-turn-1", "s5-turn-1"]


def _timed_launch(url: str, agent: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    executor = launch(url, agents=[agent], llm_adapter=ToolThenText("weather"), background_tasks=False)
    return executor, time.perf_counter() - started


def test_orphan_detection_costs_the_runs_in_flight_not_the_parked_sessions(pg_server_url: str) -> None:
    weather = define_tool("weather", input_schema=CityIn, execute=lambda inp, ctx: {"sky": "overcast"})
    agent = define_agent("scale", system_prompt="Weather.", llm_config="openai/x", tools=[weather])
    names = [unique_name("scale_empty"), unique_name("scale_parked")]
    empty, parked = (create_database(pg_server_url, name) for name in names)
    try:
        upgrade(empty)
        upgrade(parked)
        executor, empty_launch_seconds = _timed_launch(empty, agent)
        shutdown(executor)

        store = SqlSessionStore(parked)
        try:
            _add_parked_sessions(store, 2000, agent.name)
            # The oldest session of all, and last in run-id order: beyond any "newest N" or first page.
            _start_only(store, "zzz-oldest-orphan", agent.name, now=1)
        finally:
            store.close()
        executor, parked_launch_seconds = _timed_launch(parked, agent)
        try:
            handle = executor.get_handle("zzz-oldest-orphan")
            assert handle is not None and handle.result(timeout_seconds=30).status == "completed"
            with _count_statements(executor.store.engine) as statements:
                started = time.perf_counter()
                assert executor.recover_orphaned_runs() == []
                scan_seconds = time.perf_counter() - started
            # One page of running runs (there are none), whatever the number of parked sessions.
            assert len(statements) == 1 and "helix_runs" in statements[0], statements
        finally:
            shutdown(executor)
    finally:
        for name in names:
            drop_database(pg_server_url, name)
    print(
        f"launch(): {empty_launch_seconds:.3f}s with no sessions, {parked_launch_seconds:.3f}s with 2,000 parked "
        f"(and 1 orphan started); orphan scan with 2,000 parked: {scan_seconds * 1000:.1f} ms"
    )
    assert scan_seconds < 1.0  # it was 2.2 s for 1,000 sessions (one query per session); about 1 ms now
    assert parked_launch_seconds < empty_launch_seconds + 2.0  # generous: it was +2.7 s


def test_orphans_between_running_runs_are_found_across_pages(pg_database_url: str) -> None:
    upgrade(pg_database_url)
    release = threading.Event()

    def blocking(inp: CityIn, ctx: Any) -> dict[str, str]:
        release.wait(30)
        return {"sky": "clear"}

    tool = define_tool("slow_weather", input_schema=CityIn, execute=blocking)
    agent = define_agent("pager", system_prompt="Weather.", llm_config="openai/x", tools=[tool])
    executor = launch(pg_database_url, agents=[agent], llm_adapter=ToolThenText("slow_weather"), background_tasks=False)
    try:
        in_flight = [executor.execute(agent, "Weather?", session_id=f"m{i}-in-flight") for i in range(4)]
        _wait_for(lambda: len(executor.store.list_running_runs()) == 4)
        for sid in ("a-orphan", "n-orphan", "z-orphan"):  # before, between and after the live runs
            _start_only(executor.store, sid, agent.name, now=int(time.time() * 1000))
        with _count_statements(executor.store.engine) as statements:
            found = executor.recover_orphaned_runs(page_size=2)
        assert sorted(found) == ["a-orphan-turn-1", "n-orphan-turn-1", "z-orphan-turn-1"]
        pages = [s for s in statements if "FROM helix_runs" in s and "status = 'running'" in s]
        assert len(pages) == 4, statements  # 7 running runs in pages of 2
        release.set()
        for handle in in_flight:
            assert handle.result(timeout_seconds=30).status == "completed"
        for sid in ("a-orphan", "n-orphan", "z-orphan"):
            handle = executor.get_handle(sid)
            assert handle is not None and handle.result(timeout_seconds=30).status == "completed"
    finally:
        release.set()
        shutdown(executor)


def test_shutdown_drains_runs_whose_sessions_already_read_completed(
    pg_database_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    upgrade(pg_database_url)

    def slow_completion(payload: Any) -> None:
        time.sleep(0.5)  # the session reads completed; the workflow has not recorded its success yet

    weather = define_tool("weather", input_schema=CityIn, execute=lambda inp, ctx: {"sky": "overcast"})
    agent = define_agent(
        "drained",
        system_prompt="Weather.",
        llm_config="openai/x",
        tools=[weather],
        hooks=AgentHooks(on_agent_complete=slow_completion),
    )
    executor = launch(pg_database_url, agents=[agent], llm_adapter=ToolThenText("weather"), background_tasks=False)
    handles = [executor.execute(agent, f"Weather {i}?") for i in range(6)]
    ids = [h.session_id for h in handles]

    def all_completed() -> bool:
        return all((s := executor.store.load_session(i)) is not None and s.status == "completed" for i in ids)

    _wait_for(all_completed)
    started = time.perf_counter()
    left = shutdown(executor)
    shutdown_seconds = time.perf_counter() - started
    time.sleep(1.0)  # anything a leftover workflow thread would log comes now
    assert left == []
    statuses = _workflow_statuses(pg_database_url, [h.workflow_id for h in handles])
    assert statuses == {h.workflow_id: "SUCCESS" for h in handles}
    captured = capfd.readouterr()
    assert NOISE not in captured.err + captured.out
    assert "Traceback" not in captured.err + captured.out
    assert shutdown_seconds < 5, shutdown_seconds


def test_shutdown_leaves_a_waiting_run_recoverable_and_quiet(
    pg_database_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    upgrade(pg_database_url)
    ask = define_tool("ask_city", input_schema=CityIn, execute="client")
    agent = define_agent("asker", system_prompt="Ask.", llm_config="openai/x", tools=[ask])
    hot_window = 2.0
    executor_id = f"drain-{uuid.uuid4().hex[:6]}"

    def start() -> Any:
        return launch(
            pg_database_url,
            agents=[agent],
            llm_adapter=ToolThenText("ask_city"),
            executor_id=executor_id,
            hot_window_seconds=hot_window,
            background_tasks=False,
        )

    executor = start()
    handle = executor.execute(agent, "Where am I?")
    _wait_for(lambda: bool(executor.list_pending_tool_calls(handle.session_id)))
    started = time.perf_counter()
    left = shutdown(executor, drain_timeout_seconds=0.3)
    assert left == [handle.workflow_id]
    assert time.perf_counter() - started < 3
    time.sleep(hot_window + 1.5)  # the waiting thread wakes, finds DBOS gone, and dies without a word
    captured = capfd.readouterr()
    assert NOISE not in captured.err + captured.out and "Traceback" not in captured.err, captured.err
    assert _workflow_statuses(pg_database_url, [handle.workflow_id]) == {handle.workflow_id: "PENDING"}
    session = SqlSessionStore(pg_database_url)
    try:
        assert session.load_session(handle.session_id).status == "active"  # type: ignore[union-attr]
    finally:
        session.close()

    executor = start()  # same executor id: DBOS recovers the run, which waits for its answer again
    try:
        executor.submit_tool_result(
            handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": {"city": "Lima"}}
        )
        current = executor.get_handle(handle.session_id)
        assert current is not None and current.result(timeout_seconds=30).status == "completed"
    finally:
        shutdown(executor)
