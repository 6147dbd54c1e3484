"""Agents and a scripted model for the sub-agent tests (in-process and crash workers share them).

The parent (``planner``) delegates to two children in one step, ``subagent__researcher`` with two
topics, and finishes with their summaries. A researcher calls ``note`` (a tool that appends a line
to a file: a side effect a crash test counts) and then finishes with ``{"summary": ...}``.

The model answers by *who* asks (the system prompt) and by how far the conversation is (tool
results seen), never by request order: children run concurrently, so their requests interleave.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from helix_dbos import AgentConfig, LLMConfig, ToolContext, create_sub_agent_tool, define_agent, define_tool

PLANNER_PROMPT = "You are the planner."
RESEARCHER_PROMPT = "You are a researcher."


class Topic(BaseModel):
    topic: str


class Summary(BaseModel):
    summary: str


class Plan(BaseModel):
    summaries: list[str]


class Note(BaseModel):
    text: str


def effects_file() -> Path | None:
    path = os.environ.get("HELIX_SUBAGENT_EFFECTS")
    return Path(path) if path else None


def _note(args: Note, ctx: ToolContext) -> str:
    path = effects_file()
    if path is not None:
        with path.open("a") as f:
            f.write(f"{args.text}\n")
    return "noted"


def agents(base_url: str, *, timeout_ms: int | None = None) -> tuple[AgentConfig, AgentConfig]:
    """``(planner, researcher)`` against the scripted server at ``base_url``."""
    llm = LLMConfig(model="openai/fake", api_base=base_url, api_key="test")
    researcher = define_agent(
        "researcher",
        system_prompt=RESEARCHER_PROMPT,
        llm_config=llm,
        output_schema=Summary,
        tools=[define_tool("note", input_schema=Note, execute=_note)],
    )
    planner = define_agent(
        "planner",
        system_prompt=PLANNER_PROMPT,
        llm_config=llm,
        output_schema=Plan,
        tools=[create_sub_agent_tool(researcher, Topic, description="Research a topic", timeout_ms=timeout_ms)],
    )
    return planner, researcher


class Model:
    """The scripted model (a ``ScriptedOpenAIServer`` handler).

    ``hold_topic``: the researcher of this topic answers its first request after ``hold_seconds``
    (so a test can act while that child runs); ``hold_topics``: several such topics, each held
    ``hold_seconds_by_topic.get(topic, hold_seconds)``; ``hold_every_child``: every researcher of a
    held topic is held (many parents delegating the same topic), not only the first.
    ``fail_topic``: that researcher's model call is refused (HTTP 400: the child fails at once).
    ``finish_at_once``: the planner calls ``__finish__`` alongside its delegations.
    """

    def __init__(
        self,
        topics: tuple[str, ...] = ("rain", "snow"),
        *,
        hold_topic: str | None = None,
        hold_topics: tuple[str, ...] = (),
        hold_seconds: float = 30.0,
        hold_seconds_by_topic: dict[str, float] | None = None,
        hold_every_child: bool = False,
        fail_topic: str | None = None,
        finish_at_once: bool = False,
    ) -> None:
        self.topics = topics
        self.hold_topics = set(hold_topics) | ({hold_topic} if hold_topic else set())
        self._held_topics: set[str] = set()
        self.hold_seconds_by_topic = hold_seconds_by_topic or {}
        self.hold_every_child = hold_every_child
        self.hold_seconds = hold_seconds
        self.fail_topic = fail_topic
        self.finish_at_once = finish_at_once
        self.held = threading.Event()
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        tool_results = [m for m in messages if m["role"] == "tool"]
        if PLANNER_PROMPT in str(system):
            return self._planner(tool_results)
        user = next(m["content"] for m in messages if m["role"] == "user")
        topic = json.loads(user if isinstance(user, str) else user[0]["text"])["topic"]
        with self._lock:
            self.calls[topic] = self.calls.get(topic, 0) + 1
        return self._researcher(topic, tool_results)

    def _planner(self, tool_results: list[dict[str, Any]]) -> dict[str, Any]:
        if not tool_results:
            calls = [
                {"id": f"call_{t}", "name": "subagent__researcher", "arguments": {"topic": t}} for t in self.topics
            ]
            if self.finish_at_once:
                calls.append({"id": "finish", "name": "__finish__", "arguments": {"summaries": ["early"]}})
            return {"tool_calls": calls}
        summaries = []
        for m in tool_results:
            content = m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            summaries.append(content)
        return {"tool_calls": [{"id": "finish", "name": "__finish__", "arguments": {"summaries": summaries}}]}

    def _researcher(self, topic: str, tool_results: list[dict[str, Any]]) -> dict[str, Any]:
        if topic == self.fail_topic:
            return {"status": 400, "error_message": "this researcher cannot work"}
        if not tool_results:
            response: dict[str, Any] = {
                "tool_calls": [{"id": f"note_{topic}", "name": "note", "arguments": {"text": f"note {topic}"}}]
            }
            with self._lock:
                hold = topic in self.hold_topics and (self.hold_every_child or topic not in self._held_topics)
                self._held_topics.add(topic)
            if hold:
                self.held.set()
                response["delay_seconds"] = self.hold_seconds_by_topic.get(topic, self.hold_seconds)
            return response
        return {
            "tool_calls": [{"id": f"fin_{topic}", "name": "__finish__", "arguments": {"summary": f"about {topic}"}}]
        }
