"""Ephemeral sub-agents as DBOS child workflows (issue 12), on PostgreSQL with the real LiteLLM adapter.

The parent (``planner``) delegates to two ``researcher`` children in one step and finishes with
their outputs; see ``sub_agent_agents.py`` for the agents and the scripted model.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dbos import DBOS

from helix_dbos import LiteLLMAdapter, SqlStreamManager
from helix_dbos.messages import AssistantMessage, ToolResultMessage
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.runtime import step_names
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service import create_app
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db
from tests.runtime.sub_agent_agents import Model, agents

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres

TOKEN = "sub-agent-token-0123456789"


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


@pytest.fixture
def executor_for(make_executor: ExecutorFactory, runtime_db: str) -> Iterator[Callable[..., DBOSAgentExecutor]]:
    """``executor_for(base_url, timeout_ms=None)``: the planner's executor on the durable SQL streams."""
    managers: list[SqlStreamManager] = []

    def build(base_url: str, timeout_ms: int | None = None) -> DBOSAgentExecutor:
        planner, _ = agents(base_url, timeout_ms=timeout_ms)
        managers.append(SqlStreamManager(runtime_db))
        return make_executor(LiteLLMAdapter(), [planner], stream_manager=managers[-1])

    yield build
    for manager in managers:
        background_loop.run(manager.aclose())


def _child_workflows(parent_session: str) -> list[str]:
    return sorted(w.workflow_id for w in DBOS.list_workflows() if w.workflow_id.startswith(f"{parent_session}-sub-"))


def test_a_parent_delegates_to_two_sub_agents_in_one_step_and_finishes_with_their_outputs(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path
) -> None:
    model = Model()
    for server in _serve(model):
        executor = executor_for(server.base_url)
        handle = executor.execute("planner", "plan the weather report")
        result = handle.result(timeout_seconds=30)
        assert result.status == "completed", result.error
        summaries = [json.loads(s) for s in result.output.summaries]
        assert summaries == [{"summary": "about rain"}, {"summary": "about snow"}]

        parent = handle.session_id
        # Each child ran once, in its own session, as a child workflow under a deterministic id.
        assert _child_workflows(parent) == [f"{parent}-sub-1.1-call_rain-turn-1", f"{parent}-sub-1.1-call_snow-turn-1"]
        refs = executor.store.get_sub_session_refs(parent)
        assert [(r.sub_session_id, r.mode, r.status, r.parent_tool_call_id) for r in refs] == [
            (f"{parent}-sub-1.1-call_rain", "ephemeral", "completed", "call_rain"),
            (f"{parent}-sub-1.1-call_snow", "ephemeral", "completed", "call_snow"),
        ]
        child = executor.store.load_session(f"{parent}-sub-1.1-call_rain")
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
        # ... and what the run reports as its cost includes them (the CLI's per-run rollup is the same).
        usage = handle.result().usage
        assert usage is not None and usage.llm_calls == 2 + 2 * 2
        assert handle.usage() == usage


async def test_one_sse_connection_shows_the_children_between_start_and_end_and_resumes(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path
) -> None:
    model = Model()
    for server in _serve(model):
        executor = executor_for(server.base_url)
        handle = await executor.execute_async("planner", "plan")
        assert (await handle.result_async(timeout_seconds=30)).status == "completed"
        app = create_app(executor, bearer_tokens=[TOKEN])
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        url = f"/v1/sessions/{handle.session_id}/stream"
        async with httpx.AsyncClient(transport=transport, base_url="http://service", headers=headers) as http:
            events = _sse((await http.get(url)).text)
            chunks = [(event_id, json.loads(data)) for name, event_id, data in events if name == "chunk"]
            kinds = [(c["type"], c["agent_type"]) for _, c in chunks]
            starts = [i for i, k in enumerate(kinds) if k[0] == "subagent_start"]
            ends = [i for i, k in enumerate(kinds) if k[0] == "subagent_end"]
            assert len(starts) == 2 and len(ends) == 2
            child = [i for i, k in enumerate(kinds) if k[1] == "researcher"]
            assert child and starts[-1] < child[0] and child[-1] < ends[0]
            # Tagged with the child's run (in its session) and agent; each child chunk stored once.
            child_ids = {c["agent_id"] for _, c in chunks if c["agent_type"] == "researcher"}
            parent = handle.session_id
            assert child_ids == {f"{parent}-sub-1.1-call_rain-turn-1", f"{parent}-sub-1.1-call_snow-turn-1"}
            tool_ends = [(c["agent_id"], c["tool_call_id"]) for _, c in chunks if c["type"] == "tool_end"]
            assert len(tool_ends) == len(set(tool_ends)) == 2
            assert chunks[ends[0]][1]["result"] == {"summary": "about rain"}
            # Reconnecting with Last-Event-ID (the first subagent_start) delivers exactly the rest.
            resumed = _sse((await http.get(url, headers={"Last-Event-ID": chunks[starts[0]][0]})).text)
            assert [e for e in resumed if e[0] == "chunk"] == [e for e in events if e[0] == "chunk"][starts[0] + 1 :]


def _sse(text: str) -> list[tuple[str, str, str]]:
    """``(event, id, data)`` of each event of a finished ``text/event-stream`` body."""
    events: list[tuple[str, str, str]] = []
    fields: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line:
            if "data" in fields:
                events.append((fields.get("event", "message"), fields.get("id", ""), fields["data"]))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
    return events


def test_a_failed_child_is_a_tool_error_and_its_sibling_is_unaffected(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = Model(fail_topic="snow")
    for server in _serve(model):
        executor = executor_for(server.base_url)
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


def test_a_child_session_that_cannot_be_created_is_a_tool_error_and_its_sibling_is_unaffected(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The store refuses the snow child's session (a run of it is already going on): no child workflow
    starts, the call is a tool error with ``subagent.dispatch_failed``, the rain child completes."""
    from helix_dbos.runtime import starts

    for server in _serve(Model()):
        executor = executor_for(server.base_url)
        _, researcher = agents(server.base_url)
        squatter = starts.child_first_turn(
            researcher,
            "taken-sub-1.1-call_snow",
            '{"topic": "other"}',
            parent_session_id="someone-else",
            root_session_id="someone-else",
            request_key="child:other",
            fingerprint=None,
            metadata=None,
            now_ms=1,
        )
        executor.store.start_run(squatter)
        with caplog.at_level(logging.ERROR):
            result = executor.execute("planner", "plan", session_id="taken").result(timeout_seconds=30)
        assert result.status == "completed", result.error
        assert json.loads(result.output.summaries[0]) == {"summary": "about rain"}
        assert "the child session could not be created" in result.output.summaries[1]
        assert any(r.getMessage().startswith("subagent.dispatch_failed") for r in caplog.records)
        assert _child_workflows("taken") == ["taken-sub-1.1-call_rain-turn-1"]
        assert effects.read_text().splitlines() == ["note rain"]


def test_a_child_workflow_that_cannot_start_is_a_tool_error_and_its_sibling_is_unaffected(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """DBOS refuses the snow child's workflow id (a workflow of another function holds it): the call is
    a tool error with ``subagent.dispatch_failed``, the rain child completes, the parent goes on."""
    import sqlalchemy as sa

    for server in _serve(Model()):
        executor = executor_for(server.base_url)
        with executor.store.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO dbos.workflow_status (workflow_uuid, status, name) "
                    "VALUES ('nostart-sub-1.1-call_snow-turn-1', 'SUCCESS', 'someone.else')"
                )
            )
        with caplog.at_level(logging.ERROR):
            result = executor.execute("planner", "plan", session_id="nostart").result(timeout_seconds=30)
        assert result.status == "completed", result.error
        assert json.loads(result.output.summaries[0]) == {"summary": "about rain"}
        assert "could not start the child workflow" in result.output.summaries[1]
        assert any(r.getMessage().startswith("subagent.dispatch_failed") for r in caplog.records)
        assert effects.read_text().splitlines() == ["note rain"]
        # the opened run is not left active with no workflow to end it
        child = executor.store.load_session("nostart-sub-1.1-call_snow")
        assert child is not None and child.status == "failed"
        refs = {r.sub_session_id: r.status for r in executor.store.get_sub_session_refs("nostart")}
        assert refs == {"nostart-sub-1.1-call_rain": "completed", "nostart-sub-1.1-call_snow": "failed"}


def test_finish_called_alongside_delegations_waits_for_the_children(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path
) -> None:
    """The seeds: sub-agents always run, and completion is deferred until they finish."""
    for server in _serve(Model(topics=("rain",), finish_at_once=True)):
        executor = executor_for(server.base_url)
        handle = executor.execute("planner", "plan")
        result = handle.result(timeout_seconds=30)
        assert result.status == "completed" and result.output.summaries == ["early"]
        assert effects.read_text().splitlines() == ["note rain"]
        state = executor.get_state(handle.session_id)
        assert state is not None and find_unpaired_tool_call_ids(state.messages) == []
        results = {m.tool_call_id: m.content for m in state.messages if isinstance(m, ToolResultMessage)}
        assert json.loads(results["call_rain"]) == {"summary": "about rain"}


def test_a_child_past_its_timeout_is_stopped_and_the_parent_goes_on(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = Model(hold_topic="snow", hold_seconds=20)
    for server in _serve(model):
        executor = executor_for(server.base_url, timeout_ms=1500)
        started = time.monotonic()
        with caplog.at_level(logging.ERROR):
            handle = executor.execute("planner", "plan")
            result = handle.result(timeout_seconds=30)
        assert result.status == "completed", result.error
        assert time.monotonic() - started < 10
        assert "timed out" in result.output.summaries[1]
        assert json.loads(result.output.summaries[0]) == {"summary": "about rain"}  # the sibling is unaffected
        assert any(r.getMessage().startswith("subagent.dispatch_failed") for r in caplog.records)
        child = executor.store.load_session(f"{handle.session_id}-sub-1.1-call_snow")
        assert child is not None and child.status == "failed" and child.aborted
        status = DBOS.get_workflow_status(f"{handle.session_id}-sub-1.1-call_snow-turn-1")
        assert status is not None and status.status == "CANCELLED"


def test_aborting_the_parent_stops_its_running_children(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path
) -> None:
    model = Model(hold_topic="snow", hold_seconds=20)
    for server in _serve(model):
        executor = executor_for(server.base_url)
        handle = executor.execute("planner", "plan")
        deadline = time.monotonic() + 15
        while not model.held.is_set():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        executor.abort(handle.session_id, "enough")
        result = handle.result(timeout_seconds=15)
        assert result.status == "failed"
        child = executor.store.load_session(f"{handle.session_id}-sub-1.1-call_snow")
        assert child is not None and child.status == "failed" and child.aborted
        deadline = time.monotonic() + 10
        snow = f"{handle.session_id}-sub-1.1-call_snow-turn-1"
        while (DBOS.get_workflow_status(snow) or object).status != "CANCELLED":  # type: ignore[attr-defined]
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_interrupting_the_parent_interrupts_its_running_children(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path
) -> None:
    model = Model(hold_topic="snow", hold_seconds=3)
    for server in _serve(model):
        executor = executor_for(server.base_url)
        handle = executor.execute("planner", "plan")
        deadline = time.monotonic() + 15
        while not model.held.is_set():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert executor.interrupt(handle.session_id, "pause")
        result = handle.result(timeout_seconds=20)
        assert result.status == "interrupted"
        child = executor.store.load_session(f"{handle.session_id}-sub-1.1-call_snow")
        assert child is not None and child.status == "interrupted"
        state = executor.get_state(handle.session_id)
        assert state is not None and find_unpaired_tool_call_ids(state.messages) == []
        last = [m for m in state.messages if isinstance(m, AssistantMessage)]
        assert last and len(last) == 1


def test_a_human_in_the_loop_call_inside_an_ephemeral_child_is_refused_never_a_hang(
    make_executor: ExecutorFactory, effects: Path
) -> None:
    """A child whose tools wait for a human (built around ``create_sub_agent_tool``'s check, as a
    definition changed at run time would be) gets the refusal as the call's result and goes on."""
    from pydantic import BaseModel

    from helix_dbos import LLMConfig, SubAgentTool, define_agent, define_tool

    class Ask(BaseModel):
        question: str

    class Answer(BaseModel):
        answer: str

    def model(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        results = [m for m in messages if m["role"] == "tool"]
        if "clerk" in str(messages[0]["content"]):
            if not results:
                return {"tool_calls": [{"id": "ask1", "name": "ask_user", "arguments": {"question": "ok?"}}]}
            return {"tool_calls": [{"id": "f", "name": "__finish__", "arguments": {"answer": results[0]["content"]}}]}
        if not results:
            return {"tool_calls": [{"id": "c1", "name": "subagent__clerk", "arguments": {"question": "q"}}]}
        return {"text": results[0]["content"]}

    for server in _serve(model):  # type: ignore[arg-type]
        llm = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test")
        clerk = define_agent(
            "clerk",
            system_prompt="You are the clerk.",
            llm_config=llm,
            output_schema=Answer,
            tools=[define_tool("ask_user", input_schema=Ask, execute="client")],
        )
        boss = define_agent(
            "boss",
            system_prompt="You are the boss.",
            llm_config=llm,
            tools=[SubAgentTool(name="subagent__clerk", input_schema=Ask, agent=clerk)],
        )
        executor = make_executor(LiteLLMAdapter(), [boss])
        handle = executor.execute(boss, "go")
        result = handle.result(timeout_seconds=45)  # a wait for the human would take the 60 s hot window
        assert result.status == "completed", result.error
        assert "waits for a human" in result.output and "a sub-agent cannot do" in result.output
        assert executor.list_pending_tool_calls(f"{handle.session_id}-sub-1.1-c1") == []
        # The seeds' doubly-nested negative invariant: the parent is not suspended by its ephemeral
        # child's client tool, and its stream shows that child exactly once (one start, one end).
        assert executor.list_pending_tool_calls(handle.session_id) == []
        executor.streams.flush()
        records = executor.streams.stored_records(handle.session_id)
        kinds = [r.chunk.type for r in records if r.chunk.type in ("subagent_start", "subagent_end")]
        assert kinds == ["subagent_start", "subagent_end"]


def test_orphan_recovery_leaves_child_runs_to_their_parent(
    executor_for: Callable[..., DBOSAgentExecutor], effects: Path
) -> None:
    """A child run whose workflow is not started yet is its parent's to start (with the parent's
    stream and the child's mode), never the orphan sweep's, which knows neither."""
    from helix_dbos.runtime import starts

    for server in _serve(Model()):
        executor = executor_for(server.base_url)
        _, researcher = agents(server.base_url)
        start = starts.child_first_turn(
            researcher,
            "orphan-parent-sub-c1",
            '{"topic": "rain"}',
            parent_session_id="orphan-parent",
            root_session_id="orphan-parent",
            request_key="child:c1",
            fingerprint=None,
            metadata=None,
            now_ms=1,
        )
        executor.store.start_run(start)
        assert executor.recover_orphaned_runs() == []
        assert DBOS.get_workflow_status("orphan-parent-sub-c1-turn-1") is None
