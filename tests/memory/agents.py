"""The memory agent shared by the in-process runtime tests and the crash worker process."""

from __future__ import annotations

from helix_dbos import AgentConfig, MemoryConfig, define_agent
from helix_dbos.memory import MemoryContext, PostgresMemoryStore
from helix_dbos.testing import deterministic_embedding

NAMESPACE = "ada"


def namespace_of(context: MemoryContext) -> str:
    """Every session of this agent is Ada's (a real app would read a user id from the custom state)."""
    return NAMESPACE


def memory_agent(llm_base_url: str, store: PostgresMemoryStore, name: str = "rememberer") -> AgentConfig:
    """Answers in text; memories of namespace ``ada`` are injected before each turn's first call."""
    return define_agent(
        name,
        system_prompt="You answer questions about Ada.",
        llm_config={"model": "openai/fake", "api_base": llm_base_url, "api_key": "test", "max_retries": 0},
        memory=MemoryConfig(store=store, embed=deterministic_embedding, namespace=namespace_of),
    )
