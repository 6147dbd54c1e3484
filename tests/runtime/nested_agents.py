"""The agents and scripted model of the nested park tests: ``top -> mid -> leaf``.

``top`` delegates to ``mid``, which delegates to ``leaf``; each finishes with what it was told. The
model answers by who asks (the system prompt) and how far its conversation is; ``leaf``'s only
answer is held ``leaf_seconds`` (longer than the hot window, so ``mid`` and ``top`` park) and
``mid``'s last ``mid_seconds``. Shared by the in-process tests and the crash test's worker.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from pydantic import BaseModel

from helix_dbos import AgentConfig, LLMConfig, create_sub_agent_tool, define_agent


class Task(BaseModel):
    task: str


class Answer(BaseModel):
    answer: str


def tree(base_url: str, *, mid_timeout_ms: int | None = None) -> AgentConfig:
    """``top -> mid -> leaf``; ``mid_timeout_ms`` is the timeout of ``top``'s tool delegating to ``mid``."""
    llm = LLMConfig(model="openai/fake", api_base=base_url, api_key="test")
    leaf = define_agent("leaf", system_prompt="You are leaf.", llm_config=llm, output_schema=Answer)
    mid = define_agent(
        "mid",
        system_prompt="You are mid.",
        llm_config=llm,
        output_schema=Answer,
        tools=[create_sub_agent_tool(leaf, Task, description="Ask leaf")],
    )
    return define_agent(
        "top",
        system_prompt="You are top.",
        llm_config=llm,
        output_schema=Answer,
        tools=[create_sub_agent_tool(mid, Task, description="Ask mid", timeout_ms=mid_timeout_ms)],
    )


class Model:
    """Each agent delegates once (``top`` and ``mid``), then finishes with what it was told; ``leaf``'s
    only answer is held ``leaf_seconds``, ``mid``'s last ``mid_seconds``."""

    def __init__(self, leaf_seconds: float, mid_seconds: float = 0.0) -> None:
        self.leaf_seconds = leaf_seconds
        self.mid_seconds = mid_seconds
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        who = str(messages[0]["content"]).split("You are ")[1].split(".")[0]
        with self._lock:
            self.calls[who] = self.calls.get(who, 0) + 1
        results = [m for m in messages if m["role"] == "tool"]
        if who == "leaf":
            finish = {"id": "fin_leaf", "name": "__finish__", "arguments": {"answer": "leaf says hi"}}
            return {"tool_calls": [finish], "delay_seconds": self.leaf_seconds}
        if not results:
            child = "mid" if who == "top" else "leaf"
            return {"tool_calls": [{"id": f"ask_{child}", "name": f"subagent__{child}", "arguments": {"task": "hi"}}]}
        content = results[0]["content"]
        told = content if isinstance(content, str) else json.dumps(content)
        finish = {"id": f"fin_{who}", "name": "__finish__", "arguments": {"answer": f"{who}: {told}"}}
        return {"tool_calls": [finish], "delay_seconds": self.mid_seconds if who == "mid" else 0.0}
