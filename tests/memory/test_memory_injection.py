"""Memory injection through a real DBOS run on PostgreSQL, the real LiteLLM adapter and the scripted
OpenAI-compatible server: a memory reaches the model once per session, across turns.

The crash half (a SIGKILLed worker) is in ``test_memory_crash.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dbos import DBOS

from helix_dbos import UserMessage
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.memory import MemoryManager, PostgresMemoryStore, collect_injected_memory_ids
from helix_dbos.memory.injection import MEMORY_INJECTION_HEADER, is_memory_injection
from helix_dbos.testing import ScriptedOpenAIServer
from tests.memory.agents import NAMESPACE, memory_agent
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(runtime_db: str) -> Iterator[PostgresMemoryStore]:
    memory_store = PostgresMemoryStore(runtime_db)
    yield memory_store
    memory_store.close()


def _injections(body: dict[str, Any]) -> list[str]:
    """The memory-injection messages the model received in one request."""
    return [m["content"] for m in body["messages"] if m["role"] == "user" and MEMORY_INJECTION_HEADER in m["content"]]


def test_a_memory_is_injected_once_across_turns(make_executor: ExecutorFactory, store: PostgresMemoryStore) -> None:
    manager = MemoryManager(store)
    colour = manager.save("Ada's favourite colour is teal.", namespace=NAMESPACE)
    home = manager.save("Ada lives in Oslo.", namespace=NAMESPACE)
    manager.save("Bob's favourite colour is red.", namespace="bob")  # another namespace: never injected
    with ScriptedOpenAIServer([{"text": "Teal."}, {"text": "Teal, in Oslo."}, {"text": "Yes."}]) as server:
        agent = memory_agent(server.base_url, store)
        executor = make_executor(LiteLLMAdapter(), [agent])

        first = executor.execute(agent, "What is my favourite colour?")
        assert first.result().status == "completed"
        session_id = first.session_id
        second = executor.execute(agent, "Which colour do I like, and where do I live?", session_id=session_id)
        assert second.result().status == "completed"
        third = executor.execute(agent, "Is my favourite colour teal and do I live in Oslo?", session_id=session_id)
        assert third.result().status == "completed"

        turn1, turn2, turn3 = (_injections(body) for body in server.requests)
    # Turn 1: the colour memory (the question shares no word with the other one).
    assert turn1 == [f"{MEMORY_INJECTION_HEADER}\n- {colour.content}"]
    # Turn 2: turn 1's message is in the history, and only the new memory is added.
    assert turn2 == [turn1[0], f"{MEMORY_INJECTION_HEADER}\n- {home.content}"]
    # Turn 3: both memories match, both were injected already: nothing new.
    assert turn3 == turn2

    state = third.get_state()
    injected = [m for m in state.messages if is_memory_injection(m)]
    assert len(injected) == 2 and all(isinstance(m, UserMessage) for m in injected)
    assert collect_injected_memory_ids(state.messages) == {colour.id, home.id}
    assert all(m.metadata and m.metadata["hidden"] is True for m in injected)
    # The step is recorded, before the model call, on every turn of an agent with memory.
    for handle in (first, third):
        steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)]
        assert steps == ["rememberer.memory", "rememberer.llm", "rememberer.finalize"]


def test_an_agent_without_memory_records_no_memory_step(make_executor: ExecutorFactory) -> None:
    from helix_dbos import define_agent

    with ScriptedOpenAIServer([{"text": "Hi."}]) as server:
        agent = define_agent(
            "forgetful",
            system_prompt="Answer.",
            llm_config={"model": "openai/fake", "api_base": server.base_url, "api_key": "test", "max_retries": 0},
        )
        handle = make_executor(LiteLLMAdapter(), [agent]).execute(agent, "Hello")
        assert handle.result().status == "completed"
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)]
    assert steps == ["forgetful.llm", "forgetful.finalize"]
