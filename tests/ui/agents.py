"""The agent the inspector's browser tests drive: ``helix-dbos serve --agents tests.ui.agents:agents
--llm-adapter tests.ui.agents:model``.

``gatekeeper`` asks for two approval-gated tools in one step (``remove`` and ``deploy``), then
reports what each answered. Its model decides from the transcript alone, so any server process
that continues the run answers the same way. Its state records each tool it ran, so the page has
patches to show.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from helix_dbos import LLMGenerateInput, MockLLMAdapter, ToolContext, ToolResultMessage, define_agent, define_tool
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult


class PathIn(BaseModel):
    path: str


class TargetIn(BaseModel):
    target: str


class GateState(BaseModel):
    done: list[str] = []


def remove(inp: PathIn, ctx: ToolContext) -> dict[str, Any]:
    ctx.update_state(lambda state: state.done.append(f"removed {inp.path}"))
    return {"removed": inp.path}


def deploy(inp: TargetIn, ctx: ToolContext) -> dict[str, Any]:
    return {"deployed": inp.target}


gatekeeper = define_agent(
    "gatekeeper",
    system_prompt="Clean up and deploy, once the operator approves each.",
    llm_config="scripted/gatekeeper",
    state_schema=GateState,
    tools=[
        define_tool("remove", description="Remove a path", input_schema=PathIn, execute=remove, require_approval=True),
        define_tool(
            "deploy", description="Deploy to a target", input_schema=TargetIn, execute=deploy, require_approval=True
        ),
    ],
)


class WhereIn(BaseModel):
    question: str


# A client-executed tool: the browser (here, the operator in the inspector) answers with JSON.
locator = define_agent(
    "locator",
    system_prompt="Ask the browser where the user is, then say it.",
    llm_config="scripted/locator",
    tools=[define_tool("get_location", description="Where is the user?", input_schema=WhereIn, execute="client")],
)

echo = define_agent("echo", system_prompt="Repeat what the user says.", llm_config="scripted/echo")

agents = [gatekeeper, locator, echo]

PLAN_TEXT = "Planning: remove /tmp/cache, then deploy to production."


def decide(inp: LLMGenerateInput) -> TextStepResult | ToolCallsStepResult:
    """``gatekeeper``: ask for both tools first; once both answered, report them (denials included).
    ``locator``: ask the client where the user is, then say it."""
    if inp.agent_type == "echo":
        return TextStepResult(content=f"echo: {inp.messages[-1].content}", should_stop=True, stop_reason="end_turn")
    if inp.agent_type == "locator":
        last = inp.messages[-1]
        if isinstance(last, ToolResultMessage):
            return TextStepResult(content=f"You are in {last.content}.", should_stop=True, stop_reason="end_turn")
        return ToolCallsStepResult(
            content="Asking your browser.",
            tool_calls=[ParsedToolCall(id="loc-1", name="get_location", arguments={"question": "city?"})],
            stop_reason="tool_use",
        )
    results = [m for m in inp.messages if isinstance(m, ToolResultMessage)]
    if len(results) >= 2:
        summary = "; ".join(f"{m.tool_name}: {m.content}" for m in results[-2:])
        return TextStepResult(content=f"All done. {summary}", should_stop=True, stop_reason="end_turn")
    n = len(inp.messages)
    return ToolCallsStepResult(
        content=PLAN_TEXT,
        tool_calls=[
            ParsedToolCall(id=f"rm-{n}", name="remove", arguments={"path": "/tmp/cache"}),
            ParsedToolCall(id=f"dep-{n}", name="deploy", arguments={"target": "production"}),
        ],
        stop_reason="tool_use",
    )


def model() -> MockLLMAdapter:
    """A fresh scripted model whose every call is decided by :func:`decide`."""
    return MockLLMAdapter([decide] * 10_000)
