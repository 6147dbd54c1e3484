"""Agents for the A2A tests, served by one ``helix-dbos serve --a2a`` process.

``writer`` answers at once; ``digger`` runs a tool that waits for a gate file (``$HELIX_A2A_DIR/gate``)
and records each execution (``dig-entries``); ``approver`` runs a tool that needs an approval (a HITL
wait); ``boss`` delegates to ``digger`` (or, asked to publish, to ``approver``) over A2A, at the
service's own ``$HELIX_A2A_BASE/a2a/{agent}``, reached over HTTP like any A2A agent.
"""

from __future__ import annotations

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
from helix_dbos.a2a import A2ARemoteAgentTransport
from helix_dbos.remote_sub_agent import create_remote_sub_agent_tool
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from tests.tool_gate import record_and_wait

TOKEN = "a2a-token-0123456789"
ACME_TOKEN = "a2a-acme-token-0123456789"
"""The tenant ``acme``'s token (``--tenant-token acme=...``); ``TOKEN`` is the default tenant's."""


class TopicIn(BaseModel):
    topic: str


def _dir() -> Path:
    return Path(os.environ.get("HELIX_A2A_DIR", "."))


def dig(inp: TopicIn, ctx: ToolContext) -> dict[str, Any]:
    """Record the execution, then wait for the test's gate (at most 60 s, or until the run is aborted)."""
    record_and_wait(_dir(), ctx)
    return {"found": f"facts about {inp.topic}"}


def publish(inp: TopicIn, ctx: ToolContext) -> str:
    return f"published {inp.topic}"


writer = define_agent(
    "writer", description="Writes a line about anything.", system_prompt="Write.", llm_config="scripted/writer"
)
digger = define_agent(
    "digger",
    system_prompt="Dig.",
    llm_config="scripted/digger",
    tools=[define_tool("dig", description="Dig for facts", input_schema=TopicIn, execute=dig)],
)
approver = define_agent(
    "approver",
    system_prompt="Publish, with approval.",
    llm_config="scripted/approver",
    tools=[
        define_tool(
            "publish", description="Publish a topic", input_schema=TopicIn, execute=publish, require_approval=True
        )
    ],
)


def _boss() -> Any:
    base = os.environ.get("HELIX_A2A_BASE", "http://127.0.0.1:9")
    tools = [
        create_remote_sub_agent_tool(
            name,
            description=f"{name} on the A2A agent",
            input_schema=TopicIn,
            transport=A2ARemoteAgentTransport(f"{base}/a2a/{name}", token=TOKEN),
        )
        for name in ("digger", "approver")
    ]
    return define_agent("boss", system_prompt="Delegate.", llm_config="scripted/boss", tools=tools)


a2a_agents = [writer, digger, approver, _boss()]


def decide(inp: LLMGenerateInput) -> TextStepResult | ToolCallsStepResult:
    """Decided from the transcript alone (whichever process continues a run answers the same)."""
    last = inp.messages[-1]
    said = last.content if isinstance(last, UserMessage) and isinstance(last.content, str) else ""
    if inp.agent_type == "writer":
        return TextStepResult(content=f"Wrote: {said}", should_stop=True, stop_reason="end_turn")
    if isinstance(last, ToolResultMessage):
        return TextStepResult(content=f"Done: {last.content}", should_stop=True, stop_reason="end_turn")
    delegate = "subagent__approver" if said.startswith("publish") else "subagent__digger"
    tool = {"digger": "dig", "approver": "publish", "boss": delegate}[inp.agent_type]
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id="call-1", name=tool, arguments={"topic": "dbos"})], stop_reason="tool_use"
    )


def model() -> MockLLMAdapter:
    return MockLLMAdapter([decide] * 10_000)
