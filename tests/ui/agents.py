"""The agent the inspector's browser tests drive: ``helix-dbos serve --agents tests.ui.agents:agents
--llm-adapter tests.ui.agents:model``.

``gatekeeper`` asks for two approval-gated tools in one step (``remove`` and ``deploy``), then
reports what each answered. Its model decides from the transcript alone, so any server process
that continues the run answers the same way. Its state records each tool it ran, so the page has
patches to show.

``compactor`` looks two cities up per turn (two tool-calling model turns, then an answer) under a
compaction policy small enough that a few turns compact: the older turns summarised, the older
tool results cleared. Its scripted summariser writes HTML-looking text, as model text may be, so
the page is seen to show it as text.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from helix_dbos import (
    LLMGenerateInput,
    MockLLMAdapter,
    SystemMessage,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    define_agent,
    define_tool,
)
from helix_dbos.compaction import DEFAULT_SUMMARY_INSTRUCTIONS, CompactionPolicy
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


COMPACTOR_MAX_TOKENS = 250
"""Small enough that ``compactor``'s third turn compacts."""

SUMMARY_TEXT = "Earlier the user asked about <b>Lima</b> & <i>Oslo</i>."
"""What ``compactor``'s summariser answers (HTML-looking on purpose)."""


class CityIn(BaseModel):
    city: str


def lookup(inp: CityIn, ctx: ToolContext) -> dict[str, Any]:
    return {"city": inp.city, "weather": f"sunny in {inp.city}"}


compactor = define_agent(
    "compactor",
    system_prompt="Look each city up, then answer.",
    llm_config="scripted/compactor",
    tools=[define_tool("lookup", description="The weather of a city", input_schema=CityIn, execute=lookup)],
    compaction=CompactionPolicy(
        max_input_tokens=COMPACTOR_MAX_TOKENS, keep_last_messages=6, clear_tool_results_after_turns=1, summarize=True
    ),
)

agents = [gatekeeper, locator, echo, compactor]

PLAN_TEXT = "Planning: remove /tmp/cache, then deploy to production."


def decide(inp: LLMGenerateInput) -> TextStepResult | ToolCallsStepResult:
    """``gatekeeper``: ask for both tools first; once both answered, report them (denials included).
    ``locator``: ask the client where the user is, then say it."""
    if inp.agent_type == "compactor":
        return decide_compactor(inp)
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


def decide_compactor(inp: LLMGenerateInput) -> TextStepResult | ToolCallsStepResult:
    """Summarise when the compaction asks; else look up the turn's two cities, then answer."""
    first = inp.messages[0]
    if isinstance(first, SystemMessage) and first.content == DEFAULT_SUMMARY_INSTRUCTIONS:
        return TextStepResult(content=SUMMARY_TEXT, should_stop=True, stop_reason="end_turn")
    asked = max(i for i, m in enumerate(inp.messages) if isinstance(m, UserMessage))
    looked_up = [m for m in inp.messages[asked:] if isinstance(m, ToolResultMessage)]
    if len(looked_up) >= 2:
        return TextStepResult(
            content=f"Both looked up: {len(looked_up)} results.", should_stop=True, stop_reason="end_turn"
        )
    city = ("Lima", "Oslo")[len(looked_up)]
    return ToolCallsStepResult(
        content=f"Looking up {city}.",
        tool_calls=[ParsedToolCall(id=f"city-{len(inp.messages)}", name="lookup", arguments={"city": city})],
        stop_reason="tool_use",
    )


def model() -> MockLLMAdapter:
    """A fresh scripted model whose every call is decided by :func:`decide`."""
    return MockLLMAdapter([decide] * 10_000)
