"""Persistent companions, the pure parts: definitions, the injected tools, names and decisions."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import DefinitionError, PersistentAgentConfig, define_agent, define_tool
from helix_dbos.companion_tools import CompanionTool, is_companion_tool
from helix_dbos.messages import Message, ToolResultMessage, UserMessage
from helix_dbos.orchestration.companions import (
    AwaitedRun,
    auto_name,
    child_session_id,
    companion_result,
    continuation_workflow_id,
    notice_message,
    notices_due,
    plan_dispatch,
)
from helix_dbos.orchestration.message_builder import create_tool_result_message
from helix_dbos.orchestration.state_operations import build_effective_tools
from helix_dbos.orchestration.tool_batch import split_tool_batch
from helix_dbos.step_result import ParsedToolCall


class Verdict(BaseModel):
    verdict: str


def agent(name: str, **kwargs: Any) -> Any:
    return define_agent(name, system_prompt="x", llm_config="openai/fake", **kwargs)


CRITIC = agent("critic", output_schema=Verdict)
MONITOR = agent("monitor", output_schema=Verdict)


# --- definitions ------------------------------------------------------------------------------------


def test_a_companion_must_complete_via_finish() -> None:
    with pytest.raises(DefinitionError, match="needs an output_schema"):
        agent("lead", persistent_agents=[PersistentAgentConfig(agent=agent("free"), mode="blocking")])


def test_a_companion_is_listed_once_and_is_not_its_parent() -> None:
    twice = [PersistentAgentConfig(agent=CRITIC, mode="blocking")] * 2
    with pytest.raises(DefinitionError, match="listed twice"):
        agent("lead", persistent_agents=twice)
    with pytest.raises(DefinitionError, match="its own persistent companion"):
        agent("critic", output_schema=Verdict, persistent_agents=[PersistentAgentConfig(agent=CRITIC, mode="blocking")])


def test_the_mode_is_one_of_the_seeds_two() -> None:
    with pytest.raises(ValueError, match="blocking"):
        PersistentAgentConfig(agent=CRITIC, mode="later")  # type: ignore[arg-type]


# --- the injected tools -----------------------------------------------------------------------------


def tool_names(persistent: list[PersistentAgentConfig]) -> list[str]:
    return [t.name for t in build_effective_tools(agent("lead", persistent_agents=persistent))]


def test_five_tools_always_and_wait_for_result_only_with_a_blocking_companion() -> None:
    five = [
        "companion__spawnAgent",
        "companion__sendMessage",
        "companion__listChildren",
        "companion__getChildStatus",
        "companion__terminateChild",
    ]
    assert tool_names([]) == []
    assert tool_names([PersistentAgentConfig(agent=MONITOR, mode="non-blocking")]) == five
    assert tool_names(
        [
            PersistentAgentConfig(agent=MONITOR, mode="non-blocking"),
            PersistentAgentConfig(agent=CRITIC, mode="blocking"),
        ]
    ) == [*five[:4], "companion__waitForResult", five[4]]


def test_the_tools_show_the_model_camel_case_arguments_and_the_companion_catalog() -> None:
    lead = agent("lead", persistent_agents=[PersistentAgentConfig(agent=CRITIC, mode="blocking", description="judges")])
    tools = {t.name: t for t in build_effective_tools(lead)}
    spawn = tools["companion__spawnAgent"]
    assert isinstance(spawn, CompanionTool) and spawn.companion_type == "spawnAgent"
    schema = spawn.json_schema()
    assert sorted(schema["properties"]) == ["agentType", "message", "name"]
    assert sorted(schema["required"]) == ["agentType", "message"]
    assert "- critic (blocking): judges" in spawn.description
    assert sorted(tools["companion__waitForResult"].json_schema()["properties"]) == ["name", "timeoutMs"]
    assert sorted(tools["companion__terminateChild"].json_schema()["properties"]) == ["name", "reason"]
    assert tools["companion__listChildren"].json_schema()["properties"] == {}
    assert spawn.validate_input({"agentType": "critic", "message": "hi"}).agent_type == "critic"
    assert is_companion_tool(spawn) and is_companion_tool("companion__x") and not is_companion_tool("search")


def test_companion_calls_have_their_own_phase() -> None:
    lead = agent(
        "lead",
        tools=[define_tool("search", execute=lambda i, c: None)],
        persistent_agents=[PersistentAgentConfig(agent=CRITIC, mode="blocking")],
    )
    by_name = {t.name: t for t in build_effective_tools(lead)}
    calls = [
        ParsedToolCall(id="1", name="companion__spawnAgent", arguments={}),
        ParsedToolCall(id="2", name="search", arguments={}),
        ParsedToolCall(id="3", name="companion__listChildren", arguments={}),
    ]
    batch = split_tool_batch(calls, by_name, requires_approval=lambda c, t: False)
    assert [c.id for c, _ in batch.companion] == ["1", "3"]
    assert [c.id for c, _ in batch.regular] == ["2"]
    assert batch.rejected == {}


# --- names and ids ------------------------------------------------------------------------------------


def test_ids_and_automatic_names() -> None:
    assert child_session_id("s1", "critic-1") == "s1-agent-critic-1"
    assert continuation_workflow_id("s1-agent-critic", "2.1-call_9") == "s1-agent-critic-continue-2.1-call_9"
    assert continuation_workflow_id("s1-agent-critic", "call_9") == "s1-agent-critic-continue-call_9"  # recorded runs
    assert auto_name("critic", []) == "critic-1"
    assert auto_name("critic", ["critic-1", "monitor-1"]) == "critic-2"
    assert auto_name("critic", ["critic-2"]) == "critic-3"  # an explicit name took the next number


# --- what a dispatch does ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "action"),
    [
        ("spawnAgent", None, "create"),
        ("sendMessage", None, "refuse"),
        ("spawnAgent", "completed", "continue"),
        ("sendMessage", "completed", "continue"),
        ("spawnAgent", "failed", "respawn"),
        ("spawnAgent", "terminated", "respawn"),
        ("sendMessage", "terminated", "refuse"),
        ("sendMessage", "interrupted", "resume"),
        ("spawnAgent", "running", "refuse"),
        ("sendMessage", "running", "interrupt"),
    ],
)
def test_plan_dispatch(kind: Any, status: Any, action: str) -> None:
    plan = plan_dispatch(
        kind,
        name="critic",
        agent_type="critic" if kind == "spawnAgent" else None,
        child_agent_type="critic" if status else None,
        status=status,
        current_request_key="companion:older",
        call_key="1.2-c2",
    )
    assert plan.action == action
    assert (plan.error is not None) == (action == "refuse")


def test_a_re_executed_dispatch_finds_its_own_run() -> None:
    plan = plan_dispatch(
        "sendMessage",
        name="critic",
        agent_type=None,
        child_agent_type="critic",
        status="running",
        current_request_key="companion:3.1-c2",
        call_key="3.1-c2",
    )
    assert plan.action == "opened"


def test_a_call_id_used_again_on_a_later_turn_is_a_new_dispatch() -> None:
    """The companion's current run was opened by turn 1's ``c2``; turn 2's ``c2`` continues it anew."""
    plan = plan_dispatch(
        "sendMessage",
        name="critic",
        agent_type=None,
        child_agent_type="critic",
        status="completed",
        current_request_key="companion:1.2-c2",
        call_key="2.2-c2",
    )
    assert plan.action == "continue"


def test_a_name_belongs_to_one_agent_type() -> None:
    plan = plan_dispatch(
        "spawnAgent",
        name="x",
        agent_type="critic",
        child_agent_type="monitor",
        status="completed",
        current_request_key=None,
        call_key="1.1-c1",
    )
    assert plan.action == "refuse" and "is a monitor" in (plan.error or "")


# --- notices --------------------------------------------------------------------------------------------


def dispatched(call_id: str, name: str, run_id: str, *, notify: bool = True, status: str = "running") -> Message:
    result = companion_result(
        name=name, agent_type="monitor", session_id=f"s-agent-{name}", status=status, run_id=run_id
    )  # type: ignore[arg-type]
    return create_tool_result_message(
        tool_call_id=call_id, tool_name="companion__spawnAgent", result={**result, "notify": notify}
    )


def test_a_non_blocking_dispatch_awaits_a_notice_until_one_is_in_the_transcript() -> None:
    messages: list[Message] = [UserMessage(content="go"), dispatched("c1", "m", "r1")]
    due = notices_due(messages)
    assert due == [AwaitedRun(name="m", agent_type="monitor", session_id="s-agent-m", run_id="r1")]
    messages.append(notice_message(due[0], "completed", output={"verdict": "ok"}))
    assert notices_due(messages) == []
    assert "ok" in messages[-1].content  # type: ignore[union-attr]


def test_a_reported_end_or_a_later_dispatch_clears_the_awaited_run() -> None:
    status = create_tool_result_message(
        tool_call_id="c2",
        tool_name="companion__getChildStatus",
        result=companion_result(
            name="m", agent_type="monitor", session_id="s-agent-m", status="completed", run_id="r1"
        ),
    )
    assert notices_due([dispatched("c1", "m", "r1"), status]) == []
    assert [d.run_id for d in notices_due([dispatched("c1", "m", "r1"), dispatched("c2", "m", "r2")])] == ["r2"]
    assert notices_due([dispatched("c1", "m", "r1", notify=False)]) == []
    failed = ToolResultMessage(
        tool_call_id="c1", tool_name="companion__spawnAgent", content="boom", metadata={"is_error": True}
    )
    assert notices_due([failed]) == []


def test_a_notice_for_another_run_does_not_clear_the_awaited_one() -> None:
    old = notice_message(AwaitedRun("m", "monitor", "s-agent-m", "r0"), "completed")
    assert [d.run_id for d in notices_due([old, dispatched("c1", "m", "r1")])] == ["r1"]
