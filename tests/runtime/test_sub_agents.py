"""Ephemeral sub-agents as DBOS child workflows (issue 12), on PostgreSQL with the real LiteLLM adapter.

The parent (``planner``) delegates to two ``researcher`` children in one step and finishes with
their outputs; see ``sub_agent_agents.py`` for the agents and the scripted model.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbos import DBOS

from helix_dbos import LiteLLMAdapter, SqlStreamManager
from helix_dbos.messages import AssistantMessage, ToolResultMessage
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.runtime import step_names
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db
from tests.runtime.sub_agent_agents import Model, agents

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.txt"
    monkeypatch.setenv("HELIX_SUBAGENT_EFFECTS", str(path))
    return path


def _serve(model: Model) -> Iterator[ScriptedOpenAIServer]:
    server = ScriptedOpenAIServer(handler=model)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _executor(make_executor: ExecutorFactory, runtime_db: str, base_url: str, **kw: object) -> DBOSAgentExecutor:
    planner, _ = agents(base_url, **kw)  # type: ignore[arg-type]
    return make_executor(LiteLLMAdapter(), [planner], stream_manager=SqlStreamManager(runtime_db))


def _child_workflows(parent_session: str) -> list[str]:
    return sorted(w.workflow_id for w in DBOS.list_workflows() if w.workflow_id.startswith(f"{parent_session}-sub-"))


def test_a_parent_delegates_to_two_sub_agents_in_one_step_and_finishes_with_their_outputs(
    make_executor: ExecutorFactory, runtime_db: str, effects: Path
) -> None:
    model = Model()
    for server in _serve(model):
        executor = _executor(make_executor, runtime_db, server.base_url)
        handle = executor.execute("planner", "plan the weather report")
        result = handle.result(timeout_seconds=30)
        assert result.status == "completed", result.error
        summaries = [json.loads(s) for s in result.output.summaries]
        assert summaries == [{"summary": "about rain"}, {"summary": "about snow"}]

        parent = handle.session_id
        # Each child ran once, in its own session, as a child workflow under a deterministic id.
        assert _child_workflows(parent) == [f"{parent}-sub-call_rain-turn-1", f"{parent}-sub-call_snow-turn-1"]
        refs = executor.store.get_sub_session_refs(parent)
        assert [(r.sub_session_id, r.mode, r.status, r.parent_tool_call_id) for r in refs] == [
            (f"{parent}-sub-call_rain", "ephemeral", "completed", "call_rain"),
            (f"{parent}-sub-call_snow", "ephemeral", "completed", "call_snow"),
        ]
        child = executor.store.load_session(f"{parent}-sub-call_rain")
        assert child is not None and child.parent_session_id == parent and child.root_session_id == parent
        assert sorted(effects.read_text().splitlines()) == ["note rain", "note snow"]

        # The transcript pairs every call; the parent's steps read as what it did.
        state = executor.get_state(parent)
        assert state is not None and find_unpaired_tool_call_ids(state.messages) == []
        steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.run_id)]
        assert steps.count(step_names.child_start("planner")) == 2
        assert steps.count(step_names.child_wait("planner")) == 2

        # The children's usage is attributable to the parent run.
        own = executor.get_usage(parent, run_id=handle.run_id)
        tree = executor.get_usage(parent, run_id=handle.run_id, include_children=True)
        assert sum(u.kind == "llm" for u in own) == 2
        assert sum(u.kind == "llm" for u in tree) == 2 + 2 * 2


async def test_the_parent_stream_shows_the_children_between_start_and_end_and_resumes(
    make_executor: ExecutorFactory, runtime_db: str, effects: Path
) -> None:
    model = Model()
    for server in _serve(model):
        executor = _executor(make_executor, runtime_db, server.base_url)
        handle = await executor.execute_async("planner", "plan")
        assert (await handle.result_async(timeout_seconds=30)).status == "completed"
        records = await _records(executor, handle.session_id, 0)
        kinds = [(r.chunk.type, r.chunk.agent_type) for r in records]
        starts = [i for i, k in enumerate(kinds) if k[0] == "subagent_start"]
        ends = [i for i, k in enumerate(kinds) if k[0] == "subagent_end"]
        assert len(starts) == 2 and len(ends) == 2
        child_chunks = [i for i, k in enumerate(kinds) if k[1] == "researcher"]
        assert child_chunks and starts[-1] < child_chunks[0] and child_chunks[-1] < ends[0]
        # Tagged with the child's run (its session) and agent; each child chunk stored once.
        child_ids = {r.chunk.agent_id for r in records if r.chunk.agent_type == "researcher"}
        assert child_ids == {f"{handle.session_id}-sub-call_rain-turn-1", f"{handle.session_id}-sub-call_snow-turn-1"}
        tools = [
            (r.chunk.agent_id, getattr(r.chunk, "tool_call_id", None)) for r in records if r.chunk.type == "tool_end"
        ]
        assert len(tools) == len(set(tools)) == 2
        end = records[ends[0]].chunk
        assert end.type == "subagent_end" and end.result == {"summary": "about rain"}
        # Resuming after the first subagent_start (Last-Event-ID) yields exactly the rest.
        rest = await _records(executor, handle.session_id, records[starts[0]].sequence)
        assert [r.sequence for r in rest] == [r.sequence for r in records[starts[0] + 1 :]]


async def _records(executor: DBOSAgentExecutor, session_id: str, after: int) -> list:  # type: ignore[type-arg]
    iterator = await executor.streams.records(session_id, after_sequence=after)
    assert iterator is not None
    return [r async for r in iterator]


def test_a_failed_child_is_a_tool_error_and_its_sibling_is_unaffected(
    make_executor: ExecutorFactory, runtime_db: str, effects: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = Model(fail_topic="snow")
    for server in _serve(model):
        executor = _executor(make_executor, runtime_db, server.base_url)
        with caplog.at_level(logging.ERROR):
            handle = executor.execute("planner", "plan")
            result = handle.result(timeout_seconds=30)
        assert result.status == "completed", result.error
        assert json.loads(result.output.summaries[0]) == {"summary": "about rain"}
        assert "Sub-agent 'researcher' failed" in result.output.summaries[1]
        assert any(r.getMessage().startswith("subagent.dispatch_failed") for r in caplog.records)
        state = executor.get_state(handle.session_id)
        assert state is not None
        results = {m.tool_call_id: m for m in state.messages if isinstance(m, ToolResultMessage)}
        assert (results["call_snow"].metadata or {}).get("is_error") is True
        assert not (results["call_rain"].metadata or {}).get("is_error")


def test_a_child_past_its_timeout_is_stopped_and_the_parent_goes_on(
    make_executor: ExecutorFactory, runtime_db: str, effects: Path
) -> None:
    model = Model(hold_topic="snow", hold_seconds=20)
    for server in _serve(model):
        executor = _executor(make_executor, runtime_db, server.base_url, timeout_ms=1500)
        started = time.monotonic()
        handle = executor.execute("planner", "plan")
        result = handle.result(timeout_seconds=30)
        assert result.status == "completed", result.error
        assert time.monotonic() - started < 10
        assert "timed out" in result.output.summaries[1]
        child = executor.store.load_session(f"{handle.session_id}-sub-call_snow")
        assert child is not None and child.status == "failed" and child.aborted
        status = DBOS.get_workflow_status(f"{handle.session_id}-sub-call_snow-turn-1")
        assert status is not None and status.status == "CANCELLED"


def test_aborting_the_parent_stops_its_running_children(
    make_executor: ExecutorFactory, runtime_db: str, effects: Path
) -> None:
    model = Model(hold_topic="snow", hold_seconds=20)
    for server in _serve(model):
        executor = _executor(make_executor, runtime_db, server.base_url)
        handle = executor.execute("planner", "plan")
        deadline = time.monotonic() + 15
        while not model.held.is_set():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        executor.abort(handle.session_id, "enough")
        result = handle.result(timeout_seconds=15)
        assert result.status == "failed"
        child = executor.store.load_session(f"{handle.session_id}-sub-call_snow")
        assert child is not None and child.status == "failed" and child.aborted
        deadline = time.monotonic() + 10
        while (DBOS.get_workflow_status(f"{handle.session_id}-sub-call_snow-turn-1") or object).status != "CANCELLED":  # type: ignore[attr-defined]
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_interrupting_the_parent_interrupts_its_running_children(
    make_executor: ExecutorFactory, runtime_db: str, effects: Path
) -> None:
    model = Model(hold_topic="snow", hold_seconds=3)
    for server in _serve(model):
        executor = _executor(make_executor, runtime_db, server.base_url)
        handle = executor.execute("planner", "plan")
        deadline = time.monotonic() + 15
        while not model.held.is_set():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert executor.interrupt(handle.session_id, "pause")
        result = handle.result(timeout_seconds=20)
        assert result.status == "interrupted"
        child = executor.store.load_session(f"{handle.session_id}-sub-call_snow")
        assert child is not None and child.status == "interrupted"
        state = executor.get_state(handle.session_id)
        assert state is not None and find_unpaired_tool_call_ids(state.messages) == []
        last = [m for m in state.messages if isinstance(m, AssistantMessage)]
        assert last and len(last) == 1
