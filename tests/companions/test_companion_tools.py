"""The companion tools end to end on PostgreSQL with the real LiteLLM adapter (issue 12).

Non-blocking notices (exactly once, also on the parent's next turn), a running companion
redirected by ``sendMessage`` (interrupted, then resumed with the message), automatic names,
``listChildren`` / ``getChildStatus`` / ``waitForResult``, and ``terminateChild`` followed by a
fresh respawn under the same name.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, LLMConfig, PersistentAgentConfig, define_agent, define_tool
from helix_dbos.messages import Message, ToolResultMessage, UserMessage
from helix_dbos.orchestration.companions import NOTICE_METADATA_KEY
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.testing import ScriptedOpenAIServer
from tests.companions.brain import Brain, call, tool_results, users
from tests.runtime.conftest import ExecutorFactory

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("litellm_imported")]


class Verdict(BaseModel):
    verdict: str
    round: int


class Report(BaseModel):
    verdicts: list[str]


class PauseIn(BaseModel):
    seconds: float


def pause(inp: PauseIn, ctx: object) -> dict[str, bool]:
    time.sleep(inp.seconds)
    return {"paused": True}


class NoteIn(BaseModel):
    text: str


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def llm(server: ScriptedOpenAIServer) -> LLMConfig:
    return LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test", max_retries=0)


def notices(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.metadata[NOTICE_METADATA_KEY] for m in messages if isinstance(m, UserMessage) and m.metadata]


def saw_notice(messages: list[dict[str, Any]]) -> int:
    return sum(1 for text in users(messages) if text.startswith("[Companion"))


def transcript(executor: Any, session_id: str) -> list[Message]:
    return list(executor.store.get_messages(session_id, limit=200).messages)


def finisher(marker: str, delay_first: float = 0.0) -> Any:
    """A companion script: ``__finish__`` with a verdict on the latest consult (optionally slow once)."""
    state = {"first": True}

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asks = users(messages)
        reply = call("__finish__", {"verdict": f"{marker} on {asks[-1]}", "round": len(asks)}, f"fin-{len(asks)}")
        if state["first"] and delay_first:
            state["first"] = False
            return {**reply, "delay_seconds": delay_first}
        return reply

    return script


def companion(name: str, server: ScriptedOpenAIServer, marker: str, **kwargs: Any) -> Any:
    return define_agent(name, system_prompt=f"{marker}: help.", llm_config=llm(server), output_schema=Verdict, **kwargs)


def test_a_non_blocking_companion_is_announced_exactly_once(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    def lead(messages: list[dict[str, Any]]) -> dict[str, Any]:
        results = tool_results(messages)
        if not results:
            return call("companion__spawnAgent", {"agentType": "monitor", "message": "watch"}, "s1")
        if not saw_notice(messages):
            return call("pause", {"seconds": 0.2}, f"p{len(results)}")
        return call("__finish__", {"verdicts": [t for t in users(messages) if t.startswith("[Companion")]}, "done")

    brain = Brain({"LEAD": lead, "MONITOR": finisher("seen", delay_first=1.0)})
    server._handler = brain
    monitor = companion("monitor", server, "MONITOR")
    parent = define_agent(
        "lead",
        system_prompt="LEAD: delegate.",
        llm_config=llm(server),
        output_schema=Report,
        tools=[define_tool("pause", input_schema=PauseIn, execute=pause)],
        persistent_agents=[PersistentAgentConfig(agent=monitor, mode="non-blocking")],
    )
    executor = make_executor(LiteLLMAdapter(), [parent])
    result = executor.execute(parent, "go", session_id="notice-1").result(timeout_seconds=30)

    assert result.status == "completed", result
    messages = transcript(executor, "notice-1")
    spawn = next(m for m in messages if isinstance(m, ToolResultMessage) and m.tool_call_id == "s1")
    assert '"name":"monitor-1"' in spawn.content and '"status":"running"' in spawn.content
    child = "notice-1-agent-monitor-1"
    assert notices(messages) == [
        {"name": "monitor-1", "sessionId": child, "runId": f"{child}-turn-1", "status": "completed"}
    ]
    assert len(result.output.verdicts) == 1 and "seen on watch" in result.output.verdicts[0]
    # every model call after the notice saw it once, none saw it twice
    seen = [saw_notice(r) for r in brain.requests["LEAD"]]
    assert seen[-1] == 1 and set(seen) == {0, 1}
    assert find_unpaired_tool_call_ids(messages) == []


def test_a_notice_for_a_parent_that_already_finished_arrives_on_its_next_turn(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    def lead(messages: list[dict[str, Any]]) -> dict[str, Any]:
        results = tool_results(messages)
        if not results:
            return call("companion__spawnAgent", {"agentType": "monitor", "name": "m", "message": "later"}, "s1")
        return call("__finish__", {"verdicts": [t for t in users(messages) if t.startswith("[Companion")]}, "f")

    brain = Brain({"LEAD": lead, "MONITOR": finisher("late", delay_first=0.8)})
    server._handler = brain
    monitor = companion("monitor", server, "MONITOR")
    parent = define_agent(
        "lead2",
        system_prompt="LEAD: delegate.",
        llm_config=llm(server),
        output_schema=Report,
        persistent_agents=[PersistentAgentConfig(agent=monitor, mode="non-blocking")],
    )
    executor = make_executor(LiteLLMAdapter(), [parent])
    first = executor.execute(parent, "go", session_id="notice-2").result(timeout_seconds=30)
    assert first.status == "completed" and first.output.verdicts == []
    deadline = time.monotonic() + 15
    while (s := executor.store.load_session("notice-2-agent-m")) is None or s.status != "completed":
        assert time.monotonic() < deadline, "the companion never completed"
        time.sleep(0.05)

    second = executor.execute(parent, "again", session_id="notice-2").result(timeout_seconds=30)
    assert second.status == "completed"
    assert len(second.output.verdicts) == 1 and "late on later" in second.output.verdicts[0]
    third = executor.execute(parent, "once more", session_id="notice-2").result(timeout_seconds=30)
    assert third.output.verdicts == second.output.verdicts  # the same one notice: never delivered twice
    assert len(notices(transcript(executor, "notice-2"))) == 1


def test_send_message_redirects_a_running_companion(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    def editor(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asks = users(messages)
        if len(asks) == 1 and not tool_results(messages):
            return {**call("note", {"text": asks[0]}, "n1"), "delay_seconds": 0.5}
        return call("__finish__", {"verdict": "edited " + "+".join(asks), "round": len(asks)}, f"fin{len(asks)}")

    def lead(messages: list[dict[str, Any]]) -> dict[str, Any]:
        results = tool_results(messages)
        if not results:
            return call("companion__spawnAgent", {"agentType": "editor", "name": "ed", "message": "first"}, "s1")
        if len(results) == 1:
            return call("companion__sendMessage", {"name": "ed", "message": "second"}, "s2")
        if not saw_notice(messages):
            return call("pause", {"seconds": 0.2}, f"p{len(results)}")
        return call("__finish__", {"verdicts": [t for t in users(messages) if t.startswith("[Companion")]}, "done")

    brain = Brain({"LEAD": lead, "EDITOR": editor})
    server._handler = brain
    notes: list[str] = []
    ed = companion(
        "editor",
        server,
        "EDITOR",
        tools=[define_tool("note", input_schema=NoteIn, execute=lambda i, c: notes.append(i.text) or {"ok": True})],
    )
    parent = define_agent(
        "lead3",
        system_prompt="LEAD: delegate.",
        llm_config=llm(server),
        output_schema=Report,
        tools=[define_tool("pause", input_schema=PauseIn, execute=pause)],
        persistent_agents=[PersistentAgentConfig(agent=ed, mode="non-blocking")],
    )
    executor = make_executor(LiteLLMAdapter(), [parent])
    result = executor.execute(parent, "go", session_id="redirect").result(timeout_seconds=30)

    assert result.status == "completed", result
    child = "redirect-agent-ed"
    runs = executor.store.list_runs(child)
    assert [(r.workflow_id, r.status) for r in runs] == [
        (f"{child}-turn-1", "interrupted"),
        (f"{child}-continue-1.2-s2", "completed"),
    ]
    child_messages = transcript(executor, child)
    assert [m.content for m in child_messages if isinstance(m, UserMessage)] == ["first", "second"]
    assert find_unpaired_tool_call_ids(child_messages) == []
    assert notes in (["first"], [])  # the note ran at most once (the interrupt may land before it)
    parent_messages = transcript(executor, "redirect")
    assert [n["runId"] for n in notices(parent_messages)] == [f"{child}-continue-1.2-s2"]
    assert "edited first+second" in result.output.verdicts[0]


def test_names_status_wait_terminate_and_a_fresh_respawn(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    def worker(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asks = users(messages)
        reply = call("__finish__", {"verdict": f"did {asks[-1]}", "round": len(asks)}, f"fin{len(asks)}")
        return {**reply, "delay_seconds": 20} if asks[-1] == "slow" else reply

    plan = [
        ("companion__spawnAgent", {"agentType": "worker", "message": "slow"}),
        ("companion__spawnAgent", {"agentType": "worker", "message": "fast"}),
        ("companion__waitForResult", {"name": "worker-2"}),
        ("companion__listChildren", {}),
        ("companion__terminateChild", {"name": "worker-1", "reason": "enough"}),
        ("companion__getChildStatus", {"name": "worker-1"}),
        ("companion__spawnAgent", {"agentType": "worker", "name": "worker-1", "message": "again"}),
        ("companion__waitForResult", {"name": "worker-1", "timeoutMs": 10000}),
        ("companion__getChildStatus", {"name": "nobody"}),
    ]

    def boss(messages: list[dict[str, Any]]) -> dict[str, Any]:
        n = len(tool_results(messages))
        if n < len(plan):
            return call(plan[n][0], plan[n][1], f"b{n}")
        return call("__finish__", {"verdicts": []}, "done")

    brain = Brain({"BOSS": boss, "WORKER": worker, "CHECKER": finisher("checked")})
    server._handler = brain
    parent = define_agent(
        "boss",
        system_prompt="BOSS: manage.",
        llm_config=llm(server),
        output_schema=Report,
        persistent_agents=[
            PersistentAgentConfig(agent=companion("worker", server, "WORKER"), mode="non-blocking"),
            PersistentAgentConfig(agent=companion("checker", server, "CHECKER"), mode="blocking"),
        ],
    )
    executor = make_executor(LiteLLMAdapter(), [parent])
    result = executor.execute(parent, "go", session_id="boss").result(timeout_seconds=40)
    assert result.status == "completed", result

    out = {m.tool_call_id: m for m in transcript(executor, "boss") if isinstance(m, ToolResultMessage)}

    def res(i: int) -> Any:
        return json.loads(out[f"b{i}"].content)

    assert res(0)["name"] == "worker-1" and res(0)["status"] == "running"
    assert res(1)["name"] == "worker-2"
    assert res(2)["status"] == "completed" and res(2)["output"] == {"verdict": "did fast", "round": 1}
    listed = {c["name"]: c["status"] for c in res(3)["children"]}
    assert listed == {"worker-1": "running", "worker-2": "completed"}
    assert res(4)["status"] == "terminated"
    assert res(5)["status"] == "terminated" and res(5)["sessionId"] == "boss-agent-worker-1"
    assert res(6)["status"] == "running"
    assert res(7)["status"] == "completed" and res(7)["output"] == {"verdict": "did again", "round": 1}
    assert out["b8"].metadata and out["b8"].content == "No companion named 'nobody'."
    # the respawn started afresh: the old transcript is gone, the runs tell the story
    w1 = "boss-agent-worker-1"
    assert [m.content for m in transcript(executor, w1) if isinstance(m, UserMessage)] == ["again"]
    assert [(r.workflow_id, r.status) for r in executor.store.list_runs(w1)] == [
        (f"{w1}-turn-1", "failed"),
        (f"{w1}-respawn-1.7-b6", "completed"),
    ]
    names = {r.name: r.status for r in executor.store.get_sub_session_refs("boss")}
    assert names == {"worker-1": "completed", "worker-2": "completed"}
    # every non-blocking run's end was reported by a tool (wait, terminate, wait): no notice is due
    assert [n["name"] for n in notices(transcript(executor, "boss"))] == []


def test_terminate_cascades_to_the_companions_own_companions(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    def leaf(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {**call("__finish__", {"verdict": "late", "round": 1}, "lf"), "delay_seconds": 20}

    def mid(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if not tool_results(messages):
            return call("companion__spawnAgent", {"agentType": "leaf", "name": "l", "message": "dig"}, "m1")
        return call("__finish__", {"verdict": "delegated", "round": 1}, "mf")

    def top(messages: list[dict[str, Any]]) -> dict[str, Any]:
        n = len(tool_results(messages))
        if n == 0:
            return call("companion__spawnAgent", {"agentType": "mid", "name": "m", "message": "go"}, "t1")
        if n == 1:
            return call("companion__terminateChild", {"name": "m"}, "t2")
        return call("__finish__", {"verdicts": []}, "tf")

    server._handler = Brain({"TOP": top, "MID": mid, "LEAF": leaf})
    leaf_agent = companion("leaf", server, "LEAF")
    mid_agent = companion(
        "mid", server, "MID", persistent_agents=[PersistentAgentConfig(agent=leaf_agent, mode="non-blocking")]
    )
    parent = define_agent(
        "top",
        system_prompt="TOP: delegate.",
        llm_config=llm(server),
        output_schema=Report,
        persistent_agents=[PersistentAgentConfig(agent=mid_agent, mode="blocking")],
    )
    executor = make_executor(LiteLLMAdapter(), [parent])
    result = executor.execute(parent, "go", session_id="cascade").result(timeout_seconds=30)

    assert result.status == "completed", result
    leaf_session = executor.store.load_session("cascade-agent-m-agent-l")
    assert leaf_session is not None and leaf_session.status == "failed" and leaf_session.aborted
    mid_session = executor.store.load_session("cascade-agent-m")
    assert mid_session is not None and mid_session.status == "completed"  # it had finished; only its child ran


def test_a_companion_whose_workflow_cannot_start_is_not_left_busy(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    """DBOS refuses the companion's workflow id (another function holds it): the spawn is a tool error,
    the opened run is ended ``failed``, and spawning the name again starts it afresh (no wait on a
    run nothing would ever finish)."""
    import sqlalchemy as sa

    def lead(messages: list[dict[str, Any]]) -> dict[str, Any]:
        n = len(tool_results(messages))
        if n < 2:
            return call("companion__spawnAgent", {"agentType": "helper", "name": "h", "message": f"try {n}"}, f"s{n}")
        return call("__finish__", {"verdicts": []}, "done")

    server._handler = Brain({"LEAD": lead, "HELPER": finisher("ok")})
    parent = define_agent(
        "lead4",
        system_prompt="LEAD: delegate.",
        llm_config=llm(server),
        output_schema=Report,
        persistent_agents=[PersistentAgentConfig(agent=companion("helper", server, "HELPER"), mode="blocking")],
    )
    executor = make_executor(LiteLLMAdapter(), [parent])
    with executor.store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dbos.workflow_status (workflow_uuid, status, name) "
                "VALUES ('nostart-agent-h-turn-1', 'SUCCESS', 'someone.else')"
            )
        )
    result = executor.execute(parent, "go", session_id="nostart").result(timeout_seconds=30)

    assert result.status == "completed", result
    out = {m.tool_call_id: m for m in transcript(executor, "nostart") if isinstance(m, ToolResultMessage)}
    assert "could not be started" in out["s0"].content and out["s0"].metadata
    again = json.loads(out["s1"].content)
    assert again["status"] == "completed" and again["output"] == {"verdict": "ok on try 1", "round": 1}
    child = "nostart-agent-h"
    assert [(r.workflow_id, r.status) for r in executor.store.list_runs(child)] == [
        (f"{child}-turn-1", "failed"),
        (f"{child}-respawn-1.2-s1", "completed"),
    ]
