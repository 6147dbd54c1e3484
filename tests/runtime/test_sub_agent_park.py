"""A parent waiting on sub-agent children parks after the hot window and holds no thread (issue 32).

On PostgreSQL with the real LiteLLM adapter against the scripted server; the agents and the model
are ``sub_agent_agents.py``'s (a planner delegating to two researchers). The hot window is short
(0.3 s) and a held researcher answers seconds later, so the planner parks as
``suspended_awaiting_children``; the held child's end continues it (no workers' sweep runs in
these tests: only the child's own wake can), and its calls get the results a hot wait gives.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from helix_dbos import LiteLLMAdapter, SqlStreamManager
from helix_dbos.messages import ToolResultMessage
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.runtime import step_names
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.child_park import ParentWaker
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.testing import ScriptedOpenAIServer
from tests.run_probes import threads_in_runs
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db
from tests.runtime.sub_agent_agents import Model, agents

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres

HOT_WINDOW = 0.3


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.txt"
    monkeypatch.setenv("HELIX_SUBAGENT_EFFECTS", str(path))
    return path


@pytest.fixture
def serve() -> Iterator[Callable[[Model], ScriptedOpenAIServer]]:
    servers: list[ScriptedOpenAIServer] = []

    def start(model: Model) -> ScriptedOpenAIServer:
        servers.append(ScriptedOpenAIServer(handler=model))
        servers[-1].start()
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def executor_for(make_executor: ExecutorFactory, runtime_db: str) -> Iterator[Callable[..., DBOSAgentExecutor]]:
    """``executor_for(base_url, hot_window_seconds=HOT_WINDOW, timeout_ms=None)`` on the durable SQL streams."""
    managers: list[SqlStreamManager] = []

    def build(
        base_url: str, hot_window_seconds: float = HOT_WINDOW, timeout_ms: int | None = None
    ) -> DBOSAgentExecutor:
        planner, _ = agents(base_url, timeout_ms=timeout_ms)
        managers.append(SqlStreamManager(runtime_db))
        return make_executor(
            LiteLLMAdapter(), [planner], stream_manager=managers[-1], hot_window_seconds=hot_window_seconds
        )

    yield build
    for manager in managers:
        background_loop.run(manager.aclose())


def parent_workflows(session_id: str) -> list[str]:
    return sorted(
        w.workflow_id
        for w in DBOS.list_workflows()
        if w.workflow_id.startswith(f"{session_id}-") and "-sub-" not in w.workflow_id
    )


def child_workflows(session_id: str) -> list[str]:
    return sorted(w.workflow_id for w in DBOS.list_workflows() if w.workflow_id.startswith(f"{session_id}-sub-"))


def wait_session(executor: DBOSAgentExecutor, session_id: str, timeout: float = 20) -> str:
    """The session's status once it is no longer ``active``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session = executor.store.load_session(session_id)
        if session is not None and session.status != "active":
            return session.status
        time.sleep(0.02)
    raise AssertionError(f"{session_id} still active after {timeout} s")


def tool_results(executor: DBOSAgentExecutor, session_id: str) -> list[tuple[str, str, Any]]:
    """The transcript's tool results: (call id, tool name, content), in order."""
    state = executor.get_state(session_id)
    assert state is not None and find_unpaired_tool_call_ids(state.messages) == []
    return [(m.tool_call_id, m.tool_name, m.content) for m in state.messages if isinstance(m, ToolResultMessage)]


def test_a_parent_parks_on_a_running_child_and_its_continuation_gets_the_result_a_hot_wait_gives(
    executor_for: Callable[..., DBOSAgentExecutor], serve: Callable[[Model], ScriptedOpenAIServer], effects: Path
) -> None:
    # The same delegation waited on hot (a window longer than the child) is the reference.
    hot = executor_for(serve(Model(hold_topic="rain", hold_seconds=1.0)).base_url, hot_window_seconds=60)
    reference = hot.execute("planner", "plan")
    assert reference.result(timeout_seconds=30).status == "completed"
    expected = tool_results(hot, reference.session_id)
    expected_output = hot.get_state(reference.session_id).output  # type: ignore[union-attr]
    hot.close()  # one executor per process
    effects.write_text("")

    model = Model(hold_topic="rain", hold_seconds=1.5)
    executor = executor_for(serve(model).base_url)
    handle = executor.execute("planner", "plan")
    parked = handle.result(timeout_seconds=30)
    assert parked.status == "suspended_awaiting_children", parked.error
    children = (parked.suspended or {})["children"]
    assert [c["parent_tool_call_id"] for c in children if c["parent_tool_call_id"] == "call_rain"] == ["call_rain"]
    run = executor.store.get_run(handle.run_id)
    assert run is not None and run.status == "suspended"

    session = handle.session_id
    assert wait_session(executor, session) == "completed"
    assert tool_results(executor, session) == expected  # same calls, same results, same order
    state = executor.get_state(session)
    assert state is not None and state.output == expected_output
    # The parent ran twice (the parked run and its continuation), each child once.
    assert parent_workflows(session) == sorted([handle.run_id, executor.get_current_run(session).run_id])  # type: ignore[union-attr]
    assert len(parent_workflows(session)) == 2
    assert child_workflows(session) == [f"{session}-sub-1.1-call_rain-turn-1", f"{session}-sub-1.1-call_snow-turn-1"]
    assert model.calls == {"rain": 2, "snow": 2}
    assert sorted(effects.read_text().splitlines()) == ["note rain", "note snow"]
    continuation = executor.get_current_run(session)
    assert continuation is not None and continuation.mode == "resume"
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(continuation.run_id)]
    assert steps.count(step_names.child_awaited("planner")) == 1
    assert steps.count(step_names.child_start("planner")) == 0
    assert steps.count(step_names.child_wait("planner")) == 2
    refs = executor.store.get_sub_session_refs(session)
    assert {r.parent_tool_call_id: r.status for r in refs} == {"call_rain": "completed", "call_snow": "completed"}


def test_parallel_children_park_the_parent_until_all_have_ended_and_it_continues_once(
    executor_for: Callable[..., DBOSAgentExecutor], serve: Callable[[Model], ScriptedOpenAIServer], effects: Path
) -> None:
    model = Model(hold_topics=("rain", "snow"), hold_seconds_by_topic={"rain": 1.0, "snow": 2.0})
    executor = executor_for(serve(model).base_url)
    handle = executor.execute("planner", "plan")
    parked = handle.result(timeout_seconds=30)
    assert parked.status == "suspended_awaiting_children"
    waits = sorted(c["parent_tool_call_id"] for c in (parked.suspended or {})["children"])
    assert waits == ["call_rain", "call_snow"]

    session = handle.session_id
    assert wait_session(executor, session) == "completed"
    assert len(parent_workflows(session)) == 2  # one continuation, though two children ended
    results = tool_results(executor, session)
    assert [call for call, _, _ in results] == ["call_rain", "call_snow", "finish"]
    assert [json.loads(content) for _, _, content in results[:2]] == [
        {"summary": "about rain"},
        {"summary": "about snow"},
    ]
    assert model.calls == {"rain": 2, "snow": 2}


def test_aborting_a_parked_parent_stops_its_child_and_continues_nothing(
    executor_for: Callable[..., DBOSAgentExecutor], serve: Callable[[Model], ScriptedOpenAIServer], effects: Path
) -> None:
    executor = executor_for(serve(Model(hold_topic="snow", hold_seconds=20)).base_url)
    handle = executor.execute("planner", "plan")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    executor.abort(session, "enough")
    child = executor.store.load_session(f"{session}-sub-1.1-call_snow")
    assert child is not None and child.status == "failed" and child.aborted
    deadline = time.monotonic() + 10
    snow = f"{session}-sub-1.1-call_snow-turn-1"
    while (DBOS.get_workflow_status(snow) or object).status != "CANCELLED":  # type: ignore[attr-defined]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    parent = executor.store.load_session(session)
    assert parent is not None and parent.status == "failed" and parent.aborted
    time.sleep(0.5)  # a wake would have started the continuation by now
    assert parent_workflows(session) == [handle.run_id]


def test_interrupting_a_parked_parent_interrupts_its_child_and_the_continuation_ends_interrupted(
    executor_for: Callable[..., DBOSAgentExecutor], serve: Callable[[Model], ScriptedOpenAIServer], effects: Path
) -> None:
    executor = executor_for(serve(Model(hold_topic="snow", hold_seconds=3)).base_url)
    handle = executor.execute("planner", "plan")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    assert executor.interrupt(session, "pause")
    assert wait_session(executor, session) == "interrupted"
    child = executor.store.load_session(f"{session}-sub-1.1-call_snow")
    assert child is not None and child.status == "interrupted"
    assert len(parent_workflows(session)) == 2
    results = {call: content for call, _, content in tool_results(executor, session)}
    assert json.loads(results["call_rain"]) == {"summary": "about rain"}
    assert "interrupted" in results["call_snow"]


def test_a_childs_deadline_stops_it_while_the_parent_is_parked_and_the_parent_reads_timeout(
    executor_for: Callable[..., DBOSAgentExecutor], serve: Callable[[Model], ScriptedOpenAIServer], effects: Path
) -> None:
    executor = executor_for(serve(Model(hold_topic="snow", hold_seconds=20)).base_url, timeout_ms=1500)
    started = time.monotonic()
    handle = executor.execute("planner", "plan")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    assert wait_session(executor, session) == "completed"
    assert time.monotonic() - started < 10
    child = executor.store.load_session(f"{session}-sub-1.1-call_snow")
    assert child is not None and child.status == "failed" and child.aborted
    state = executor.get_state(session)
    assert state is not None
    summaries = state.output["summaries"] if isinstance(state.output, dict) else state.output.summaries
    assert json.loads(summaries[0]) == {"summary": "about rain"}
    assert "timed out" in summaries[1]  # the message a parent waiting hot gives a timed-out child


def threads_running(agent: str, turn: int | None = None) -> int:
    """Threads now inside a run of ``agent``, of ``turn`` if given."""
    return threads_in_runs(lambda request: request.agent_name == agent and turn in (None, request.turn))


def test_parked_parents_hold_no_thread_and_all_complete(
    executor_for: Callable[..., DBOSAgentExecutor], serve: Callable[[Model], ScriptedOpenAIServer], effects: Path
) -> None:
    """30 parents, each delegating one child that waits 3 s on the model: once the hot window has
    passed, no parent holds a thread (waiting hot, each held one for its child's whole run), the
    children's model calls hold theirs; then every parent completes."""
    n = 30
    model = Model(topics=("rain",), hold_topic="rain", hold_seconds=3.0, hold_every_child=True)
    executor = executor_for(serve(model).base_url, hot_window_seconds=0.2)
    with ThreadPoolExecutor(max_workers=8) as starts:  # the starts' round trips overlap
        handles = list(starts.map(lambda _: executor.execute("planner", "plan"), range(n)))
    for handle in handles:
        assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    assert threads_running("planner", turn=1) == 0  # continuations of children already done may run
    assert threads_running("researcher") > 0  # the children are still in their held model calls
    for handle in handles:
        assert wait_session(executor, handle.session_id, timeout=30) == "completed"


def test_the_workers_sweep_continues_a_parked_parent_whose_wake_was_lost(
    executor_for: Callable[..., DBOSAgentExecutor],
    serve: Callable[[Model], ScriptedOpenAIServer],
    effects: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wake is an optimisation of latency: with it lost (a worker killed between the child's end and
    its wake), the sweep every worker runs continues the parent, once however often it runs."""
    monkeypatch.setattr(ParentWaker, "wake", lambda self, parent_session_id: None)
    executor = executor_for(serve(Model(hold_topic="snow", hold_seconds=1.0)).base_url)
    handle = executor.execute("planner", "plan")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    deadline = time.monotonic() + 20
    while (child := executor.store.load_session(f"{session}-sub-1.1-call_snow")) is None or child.status == "active":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    assert executor.store.load_session(session).status == "active"  # type: ignore[union-attr]  # nobody woke it
    [continued] = executor.expire_parked_calls()
    assert executor.expire_parked_calls() == []
    assert wait_session(executor, session) == "completed"
    assert parent_workflows(session) == sorted([handle.run_id, continued])
    assert [call for call, _, _ in tool_results(executor, session)] == ["call_rain", "call_snow", "finish"]
