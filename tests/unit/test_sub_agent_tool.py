"""``create_sub_agent_tool``: what it builds, and the agents it refuses at definition time."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from helix_dbos import DefinitionError, SubAgentTool, create_sub_agent_tool, define_agent, define_tool
from helix_dbos.errors import SubAgentDefinitionError
from helix_dbos.orchestration.tool_batch import split_tool_batch
from helix_dbos.runtime.registry import AgentRegistry
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.sub_agent import is_sub_agent_tool


class Topic(BaseModel):
    topic: str


class Summary(BaseModel):
    summary: str


def _agent(name: str = "researcher", **kw: object) -> object:
    return define_agent(name, system_prompt="x", llm_config="openai/fake", **kw)  # type: ignore[arg-type]


def _noop(args: object, ctx: object) -> str:
    return "ok"


def test_the_model_sees_subagent__name_with_the_input_schema_and_the_agents_description() -> None:
    child = define_agent(
        "researcher", system_prompt="x", llm_config="openai/fake", output_schema=Summary, description="Researches."
    )
    tool = create_sub_agent_tool(child, Topic, timeout_ms=5000)
    assert isinstance(tool, SubAgentTool) and is_sub_agent_tool(tool)
    assert tool.name == "subagent__researcher"
    assert tool.description == "Researches."
    assert tool.json_schema()["properties"] == {"topic": {"title": "Topic", "type": "string"}}
    assert tool.timeout_ms == 5000 and tool.agent is child
    assert create_sub_agent_tool(child, Topic, description="Other").description == "Other"
    assert not is_sub_agent_tool(define_tool("plain", execute=_noop))


def test_an_agent_without_output_schema_is_refused() -> None:
    with pytest.raises(SubAgentDefinitionError, match="no output_schema") as caught:
        create_sub_agent_tool(_agent(), Topic)  # type: ignore[arg-type]
    assert isinstance(caught.value, DefinitionError) and caught.value.code == "validation_error"


@pytest.mark.parametrize(
    "tool",
    [
        define_tool("ask_user", input_schema=Topic, execute="client"),
        define_tool("pay", input_schema=Topic, execute=_noop, require_approval=True),
        define_tool("maybe_pay", input_schema=Topic, execute=_noop, require_approval=lambda args: True),
    ],
    ids=["client", "approval", "predicate"],
)
def test_an_agent_that_waits_for_a_human_is_refused(tool: object) -> None:
    child = _agent(output_schema=Summary, tools=[tool])
    with pytest.raises(SubAgentDefinitionError, match="ephemeral sub-agent cannot"):
        create_sub_agent_tool(child, Topic)  # type: ignore[arg-type]


def test_names_and_options_a_tool_cannot_have_are_refused() -> None:
    with pytest.raises(SubAgentDefinitionError, match="not a valid tool name"):
        create_sub_agent_tool(_agent("team.researcher", output_schema=Summary), Topic)  # type: ignore[arg-type]
    with pytest.raises(SubAgentDefinitionError, match="timeout_ms"):
        create_sub_agent_tool(_agent(output_schema=Summary), Topic, timeout_ms=0)  # type: ignore[arg-type]
    with pytest.raises(SubAgentDefinitionError, match="input_schema"):
        create_sub_agent_tool(_agent(output_schema=Summary), dict)  # type: ignore[arg-type]


def test_registering_a_parent_registers_the_agents_it_delegates_to() -> None:
    grandchild = _agent("checker", output_schema=Summary)
    child = _agent(output_schema=Summary, tools=[create_sub_agent_tool(grandchild, Topic)])  # type: ignore[arg-type]
    parent = _agent("planner", tools=[create_sub_agent_tool(child, Topic)])  # type: ignore[arg-type]
    registry = AgentRegistry()
    registry.register(parent)  # type: ignore[arg-type]
    assert registry.names() == ["checker", "planner", "researcher"]


def test_sub_agent_calls_go_to_their_own_phase_in_call_order() -> None:
    child = _agent(output_schema=Summary)
    delegate = create_sub_agent_tool(child, Topic)  # type: ignore[arg-type]
    plain = define_tool("plain", execute=_noop)
    calls = [
        ParsedToolCall(id="1", name="subagent__researcher", arguments={"topic": "a"}),
        ParsedToolCall(id="2", name="plain", arguments={}),
        ParsedToolCall(id="3", name="subagent__researcher", arguments={"topic": "b"}),
        ParsedToolCall(id="4", name="subagent__unknown", arguments={}),
    ]
    batch = split_tool_batch(calls, {t.name: t for t in (delegate, plain)}, requires_approval=lambda call, tool: False)
    assert [c.id for c, _ in batch.sub_agents] == ["1", "3"]
    assert [c.id for c, _ in batch.regular] == ["2"]
    assert list(batch.rejected) == ["4"]
