"""Time travel into a companion: fork its second turn with an edited input and run the fork.

A writer consults a critic companion twice (``{root}-agent-critic``, two turns on one session). The
critic's second turn is forked at its start with the consult's text replaced; ``retry`` on the fork
runs the critic on the edited draft through the real LiteLLM client against the scripted
OpenAI-compatible server. The writer's and the critic's transcripts, checkpoints, runs and child
refs stay message-for-message what they were, and the fork records where it came from.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, LLMConfig, PersistentAgentConfig, define_agent
from helix_dbos.errors import ForkConflictError, ForkEditError
from helix_dbos.messages import UserMessage
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


def critic_script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    asks = users(messages)
    return call("__finish__", {"verdict": f"verdict {len(asks)} on {asks[-1]}", "round": len(asks)}, f"fin-{len(asks)}")


def writer_script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    results = tool_results(messages)
    if not results:
        return call("companion__spawnAgent", {"agentType": "critic", "name": "critic", "message": "draft one"}, "c1")
    if len(results) == 1:
        return call("companion__sendMessage", {"name": "critic", "message": "draft two"}, "c2")
    return call("__finish__", {"verdicts": [r["output"]["verdict"] for r in results]}, "done")


def _snapshot(executor: Any, session_id: str) -> dict[str, Any]:
    store = executor.store
    return {
        "session": store.load_session(session_id),
        "messages": store.get_messages(session_id, limit=1000).messages,
        "checkpoints": store.list_checkpoints(session_id, limit=1000),
        "runs": store.list_runs(session_id),
        "refs": store.get_sub_session_refs(session_id),
        "usage": store.get_usage(session_id),
    }


def test_fork_a_companions_second_turn_with_an_edited_input(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    brain = Brain({"WRITER": writer_script, "CRITIC": critic_script})
    server._handler = brain
    llm = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test", max_retries=0)
    critic = define_agent("critic", system_prompt="CRITIC: judge drafts.", llm_config=llm, output_schema=Verdict)
    writer = define_agent(
        "writer",
        system_prompt="WRITER: write, then ask the critic.",
        llm_config=llm,
        output_schema=Report,
        persistent_agents=[PersistentAgentConfig(agent=critic, mode="blocking", description="judges drafts")],
    )
    executor = make_executor(LiteLLMAdapter(), [writer])
    handle = executor.execute(writer, "write", session_id="tt-writer")
    assert handle.result(timeout_seconds=30).status == "completed"
    child_id = "tt-writer-agent-critic"
    parent_before = _snapshot(executor, "tt-writer")
    child_before = _snapshot(executor, child_id)

    # State history: the critic's checkpoints, with step, messages and state at each.
    history = sorted(executor.list_checkpoints(child_id, limit=100).items, key=lambda c: c.timestamp)
    assert all(c.session_id == child_id and c.run_id for c in history)
    second_turn = [c for c in history if c.run_id == child_before["runs"][1].run_id]
    start = min(second_turn, key=lambda c: c.message_count)
    assert start.message_count == 4  # draft one, its verdict call and result, draft two

    fork = executor.fork(child_id, start.id, new_session_id="tt-critic-edited", message="draft two, revised")
    assert fork.created and fork.checkpoint_id == start.id
    forked = executor.store.load_session("tt-critic-edited")
    assert forked is not None and forked.parent_session_id is None and forked.root_session_id is None
    assert forked.forked_from is not None
    assert forked.forked_from["session_id"] == child_id
    assert forked.forked_from["source_parent_session_id"] == "tt-writer"
    assert forked.forked_from["source_root_session_id"] == "tt-writer"
    assert forked.forked_from["edits"] == {"message": "draft two, revised"}
    fork_messages = executor.store.get_messages("tt-critic-edited", limit=100).messages
    assert fork_messages[:3] == child_before["messages"][:3]
    assert fork_messages[3] == UserMessage(content="draft two, revised") and len(fork_messages) == 4

    result = executor.retry("tt-critic-edited").result(timeout_seconds=30)
    assert result.status == "completed", result
    assert result.output == Verdict(verdict="verdict 2 on draft two, revised", round=2)
    after = executor.store.get_messages("tt-critic-edited", limit=100).messages
    assert [m.content for m in after if isinstance(m, UserMessage)] == ["draft one", "draft two, revised"]
    assert find_unpaired_tool_call_ids(after) == []
    assert brain.requests["CRITIC"][-1][-1]["content"] == "draft two, revised"

    # The originals, message for message and row for row.
    assert _snapshot(executor, "tt-writer") == parent_before
    assert _snapshot(executor, child_id) == child_before

    # A repeat with the same edits is the same fork; other edits under that id are refused.
    again = executor.fork(child_id, start.id, new_session_id="tt-critic-edited", message="draft two, revised")
    assert not again.created
    with pytest.raises(ForkConflictError):
        executor.fork(child_id, start.id, new_session_id="tt-critic-edited", message="something else")
    with pytest.raises(ForkEditError) as refused:
        executor.fork(child_id, start.id, state={"a": 1}, state_patch={"a": 2})
    assert refused.value.code == "validation_error"
