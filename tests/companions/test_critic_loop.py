"""Persistent companions on PostgreSQL with the real LiteLLM adapter (issue 12, "Persistent companions").

A writer consults a critic companion, gets its verdict, revises and consults it again: the critic
answers on the same session (its memory intact, a new turn), and the writer finishes with both
verdicts. The scripted OpenAI-compatible server plays both models.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, LLMConfig, PersistentAgentConfig, define_agent, define_tool
from helix_dbos.messages import AssistantMessage, ToolResultMessage, UserMessage
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


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def llm(server: ScriptedOpenAIServer) -> LLMConfig:
    return LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test", max_retries=0)


def critic_script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The critic answers each consult with a verdict numbered by how many consults it has seen."""
    asks = users(messages)
    n = len(asks)
    return call("__finish__", {"verdict": f"verdict {n} on {asks[-1]}", "round": n}, f"fin-{n}")


def writer_script(reconsult: str) -> Any:
    """Consult the critic, then again with ``reconsult`` (sendMessage, or spawnAgent re-using the name)."""

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        results = tool_results(messages)
        if not results:
            spawn = {"agentType": "critic", "name": "critic", "message": "draft one"}
            return call("companion__spawnAgent", spawn, "c1")
        if len(results) == 1:
            again: dict[str, Any] = {"name": "critic", "message": "draft two"}
            if reconsult == "companion__spawnAgent":
                again["agentType"] = "critic"
            return call(reconsult, again, "c2")
        verdicts = [r["output"]["verdict"] for r in results]
        return call("__finish__", {"verdicts": verdicts}, "done")

    return script


def critic_agent(server: ScriptedOpenAIServer) -> Any:
    return define_agent("critic", system_prompt="CRITIC: judge drafts.", llm_config=llm(server), output_schema=Verdict)


@pytest.mark.parametrize("reconsult", ["companion__sendMessage", "companion__spawnAgent"])
def test_the_critic_is_reconsulted_on_its_preserved_session_with_a_fresh_verdict(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, reconsult: str
) -> None:
    brain = Brain({"WRITER": writer_script(reconsult), "CRITIC": critic_script})
    server._handler = brain
    critic = critic_agent(server)
    writer = define_agent(
        "writer",
        system_prompt="WRITER: write, then ask the critic.",
        llm_config=llm(server),
        output_schema=Report,
        persistent_agents=[PersistentAgentConfig(agent=critic, mode="blocking", description="judges drafts")],
    )
    executor = make_executor(LiteLLMAdapter(), [writer])

    handle = executor.execute(writer, "write", session_id=f"critic-loop-{reconsult[11:]}")
    result = handle.result(timeout_seconds=30)

    assert result.status == "completed", result
    assert result.output == Report(verdicts=["verdict 1 on draft one", "verdict 2 on draft two"])
    parent_id = handle.session_id
    child_id = f"{parent_id}-agent-critic"
    child = executor.store.load_session(child_id)
    assert child is not None and child.status == "completed" and child.turn == 2
    assert child.parent_session_id == parent_id
    assert child.output == {"verdict": "verdict 2 on draft two", "round": 2}
    # one session, two turns: the second consult saw the first (its memory), and a fresh step budget
    transcript = executor.store.get_messages(child_id, limit=100).messages
    assert [type(m).__name__ for m in transcript] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    assert [m.content for m in transcript if isinstance(m, UserMessage)] == ["draft one", "draft two"]
    assert find_unpaired_tool_call_ids(transcript) == []
    assert [r.step_count for r in executor.store.list_runs(child_id)] == [1, 1]
    runs = executor.store.list_runs(child_id)
    assert [r.workflow_id for r in runs] == [f"{child_id}-turn-1", f"{child_id}-continue-1.2-c2"]
    for run in runs:
        status = DBOS.get_workflow_status(run.workflow_id)
        assert status is not None and status.status == "SUCCESS"
    # the parent: a persistent ref named critic, and every call paired
    refs = executor.store.get_sub_session_refs(parent_id)
    assert [(r.sub_session_id, r.mode, r.name, r.status) for r in refs] == [
        (child_id, "persistent", "critic", "completed")
    ]
    parent = executor.store.get_messages(parent_id, limit=100).messages
    assert find_unpaired_tool_call_ids(parent) == []
    calls = [c.name for m in parent if isinstance(m, AssistantMessage) for c in m.tool_calls or []]
    assert calls == ["companion__spawnAgent", reconsult, "__finish__"]
    spawn = next(m for m in parent if isinstance(m, ToolResultMessage) and m.tool_call_id == "c1")
    assert '"status":"completed"' in spawn.content and f'"sessionId":"{child_id}"' in spawn.content
    assert len(brain.requests["CRITIC"]) == 2

    # one reader of the writer's stream sees the critic's turns too (mirrored by the child runs)
    async def collect() -> list[Any]:
        stream = await handle.stream()
        assert stream is not None
        return [chunk async for chunk in stream]

    chunks = asyncio.run(collect())
    critic_outputs = [c.output for c in chunks if c.type == "output" and c.agent_type == "critic"]
    assert [o["round"] if isinstance(o, dict) else o.round for o in critic_outputs] == [1, 2]
    assert chunks[-1].type == "output" and chunks[-1].agent_type == "writer"


def test_a_reconsult_runs_on_a_fresh_max_steps_budget(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    """Each consult takes two steps (look, then finish) and the critic has ``max_steps=2``: a step count
    carried over from the first turn would stop the second consult after its first step."""

    def slow_critic(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asks, looked = users(messages), len(tool_results(messages))
        n = len(asks)
        if looked < 2 * n - 1:  # each consult: look (one result), then __finish__ (its ack follows)
            return call("look", {}, f"look-{n}")
        return call("__finish__", {"verdict": f"verdict {n} on {asks[-1]}", "round": n}, f"fin-{n}")

    server._handler = Brain({"WRITER": writer_script("companion__sendMessage"), "CRITIC": slow_critic})
    critic = define_agent(
        "critic",
        system_prompt="CRITIC: look, then judge.",
        llm_config=llm(server),
        output_schema=Verdict,
        max_steps=2,
        tools=[define_tool("look", execute=lambda i, c: {"seen": True})],
    )
    writer = define_agent(
        "writer",
        system_prompt="WRITER: write, then ask the critic.",
        llm_config=llm(server),
        output_schema=Report,
        persistent_agents=[PersistentAgentConfig(agent=critic, mode="blocking")],
    )
    executor = make_executor(LiteLLMAdapter(), [writer])
    result = executor.execute(writer, "write", session_id="fresh-budget").result(timeout_seconds=30)

    assert result.status == "completed", result
    assert result.output == Report(verdicts=["verdict 1 on draft one", "verdict 2 on draft two"])
    assert [r.step_count for r in executor.store.list_runs("fresh-budget-agent-critic")] == [2, 2]
