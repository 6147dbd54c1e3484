"""Agents for the remote sub-agent tests: a parent (served by A) delegating to agents served by B.

``helix-dbos serve --agents tests.remote.agents:remote_agents`` runs B;
``--agents tests.remote.agents:parent_agents`` runs A, whose transport reaches B at
``$HELIX_REMOTE_URL``. ``$HELIX_REMOTE_DIR`` is where the remote tool records each execution
(``dig-entries``) and waits for a gate file (``gate``): a test holds the remote run mid-tool while it
kills processes, then opens the gate.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from helix_dbos import (
    LLMGenerateInput,
    MockLLMAdapter,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    define_agent,
    define_tool,
)
from helix_dbos.client import HttpRemoteAgentTransport
from helix_dbos.remote_sub_agent import create_remote_sub_agent_tool
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from tests.tool_gate import record_and_wait

TOKEN = "remote-token-0123456789"


class TopicIn(BaseModel):
    topic: str


def _dir() -> Path:
    return Path(os.environ.get("HELIX_REMOTE_DIR", "."))


def dig(inp: TopicIn, ctx: ToolContext) -> dict[str, Any]:
    """Record the execution, then wait for the test's gate (at most 60 s)."""
    record_and_wait(_dir())
    return {"found": f"facts about {inp.topic}"}


def locate(inp: TopicIn, ctx: ToolContext) -> dict[str, Any]:  # pragma: no cover - a client tool
    return {}


researcher = define_agent(
    "researcher",
    system_prompt="Research the topic you are given.",
    llm_config="scripted/researcher",
    tools=[define_tool("dig", description="Dig for facts", input_schema=TopicIn, execute=dig)],
)
asker = define_agent(
    "asker",
    system_prompt="Ask the browser.",
    llm_config="scripted/asker",
    tools=[define_tool("ask_browser", description="Ask the browser", input_schema=TopicIn, execute="client")],
)
remote_agents = [researcher, asker]


def _transport() -> HttpRemoteAgentTransport:
    return HttpRemoteAgentTransport(os.environ.get("HELIX_REMOTE_URL", "http://127.0.0.1:9"), token=TOKEN)


def _parent_agents() -> list[Any]:
    transport = _transport()
    research = create_remote_sub_agent_tool(
        "researcher", description="Research a topic on the research service", input_schema=TopicIn, transport=transport
    )
    ask = create_remote_sub_agent_tool(
        "asker", description="Ask on the remote service", input_schema=TopicIn, transport=transport
    )
    boss = define_agent("boss", system_prompt="Delegate research.", llm_config="scripted/boss", tools=[research, ask])
    return [boss]


parent_agents = _parent_agents()


def decide(inp: LLMGenerateInput) -> TextStepResult | ToolCallsStepResult:
    """Decided from the transcript alone (whichever process continues a run answers the same)."""
    last = inp.messages[-1]
    if inp.agent_type == "boss":
        if isinstance(last, ToolResultMessage):
            return TextStepResult(content=f"Boss: {last.content}", should_stop=True, stop_reason="end_turn")
        said = last.content if isinstance(last, UserMessage) and isinstance(last.content, str) else "research"
        target = "asker" if said.startswith("ask") else "researcher"
        return ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id="delegate-1", name=f"subagent__{target}", arguments={"topic": "dbos"})],
            stop_reason="tool_use",
        )
    tool = "dig" if inp.agent_type == "researcher" else "ask_browser"
    if isinstance(last, ToolResultMessage):
        found = json.loads(last.content).get("found", last.content) if last.content.startswith("{") else last.content
        return TextStepResult(content=f"Found: {found}", should_stop=True, stop_reason="end_turn")
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id="dig-1", name=tool, arguments={"topic": "dbos"})], stop_reason="tool_use"
    )


def model() -> MockLLMAdapter:
    return MockLLMAdapter([decide] * 10_000)
