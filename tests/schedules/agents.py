"""The agent the schedule tests fire: one model call, answered by the scripted OpenAI-compatible server."""

from __future__ import annotations

from helix_dbos import AgentConfig, define_agent


def reporter(base_url: str, name: str = "reporter") -> AgentConfig:
    """An agent that answers in one model call (the scripted server's handler answers every request)."""
    return define_agent(
        name,
        system_prompt="Write the report.",
        llm_config={"model": "openai/fake", "api_base": base_url, "api_key": "test", "max_retries": 0},
    )
