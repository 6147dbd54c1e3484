"""Ids derived from a model's tool call id are unique per turn and step of the parent's run.

Tool call ids are unique only within one model response for many models (scripted ones, providers
that number their calls), so a session's next turn may use ``r1`` again. A sub-agent's session and
a companion's continuation derive their ids from the call: they must not meet the ones an earlier
turn derived (a stale result, or a run id taken), and a replay must derive the same ones again.
"""

from __future__ import annotations

from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, PersistentAgentConfig, define_agent
from helix_dbos.messages import ToolResultMessage
from helix_dbos.runtime import step_names
from helix_dbos.runtime.child_park import CHILD_PARK_PATCH
from helix_dbos.runtime.ids import SCOPED_CALL_IDS_PATCH
from helix_dbos.runtime.workflow import AGENT_WORKFLOW_NAME
from tests.pg import unique_name
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres


class Topic(BaseModel):
    topic: str


class Findings(BaseModel):
    summary: str


class Verdict(BaseModel):
    ok: bool
    note: str


class Draft(BaseModel):
    text: str


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_calls", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content, "should_stop": True, "stop_reason": "end_turn"}


def test_a_sub_agent_call_id_used_again_on_the_next_turn_runs_a_new_child(make_executor: ExecutorFactory) -> None:
    from helix_dbos import create_sub_agent_tool

    researcher = define_agent(
        "ids-researcher", system_prompt="Research.", output_schema=Findings, llm_config="openai/gpt-4o-mini"
    )
    planner = define_agent(
        "ids-planner",
        system_prompt="Delegate.",
        tools=[create_sub_agent_tool(researcher, Topic, timeout_ms=60_000)],
        llm_config="openai/gpt-4o-mini",
    )
    model = MockLLMAdapter(
        [
            _call("r1", "subagent__ids-researcher", {"topic": "first"}),
            _call("f1", "__finish__", {"summary": "first"}),  # the child, turn 1
            _text("one"),
            _call("r1", "subagent__ids-researcher", {"topic": "second"}),  # the same call id, turn 2
            _call("f1", "__finish__", {"summary": "second"}),  # the child, turn 2
            _text("two"),
        ]
    )
    executor = make_executor(model, [planner])
    session = unique_name("plan")
    assert executor.execute(planner, "q1", session_id=session).result(timeout_seconds=30).output == "one"
    second = executor.execute(planner, "q2", session_id=session)
    result = second.result(timeout_seconds=30)
    assert (result.status, result.output) == ("completed", "two"), result.error

    state = executor.get_state(session)
    assert state is not None
    results = [m.content for m in state.messages if isinstance(m, ToolResultMessage)]
    assert results == ['{"summary":"first"}', '{"summary":"second"}']  # not turn 1's output again
    refs = executor.store.get_sub_session_refs(session)
    assert [(r.sub_session_id, r.parent_tool_call_id, r.status) for r in refs] == [
        (f"{session}-sub-1.1-r1", "r1", "completed"),
        (f"{session}-sub-2.1-r1", "r1", "completed"),
    ]
    for ref in refs:
        assert [run.run_id for run in executor.list_runs(ref.sub_session_id)] == [f"{ref.sub_session_id}-turn-1"]

    # The ids were derived under the named replay patch, recorded once per run that delegates: the
    # step list of a run with a child is its children's steps plus that one marker, and the marker
    # of parking on sub-agents, asked at the run's first wait on one.
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(second.run_id)]
    assert steps == [
        step_names.llm("ids-planner"),
        f"DBOS.patch-{SCOPED_CALL_IDS_PATCH}",
        step_names.child_start("ids-planner"),
        AGENT_WORKFLOW_NAME,  # the child's start, recorded by DBOS
        f"DBOS.patch-{CHILD_PARK_PATCH}",
        step_names.child_wait("ids-planner"),
        step_names.llm("ids-planner"),
        step_names.finalize("ids-planner"),
    ]


def _writer() -> Any:
    critic = define_agent(
        "ids-critic", system_prompt="Judge the draft.", output_schema=Verdict, llm_config="openai/gpt-4o-mini"
    )
    return define_agent(
        "ids-writer",
        system_prompt="Write, ask the critic, revise.",
        output_schema=Draft,
        llm_config="openai/gpt-4o-mini",
        persistent_agents=[PersistentAgentConfig(agent=critic, mode="blocking", description="reviews drafts")],
    )


def _critic_loop() -> list[dict[str, Any]]:
    """The README's critic loop: one parent turn, two consultations of the critic."""
    return [
        _call("c1", "companion__spawnAgent", {"agentType": "ids-critic", "name": "critic", "message": "Draft: hi"}),
        _call("v1", "__finish__", {"ok": False, "note": "too short"}),
        _call("c2", "companion__sendMessage", {"name": "critic", "message": "Draft: hello, world"}),
        _call("v2", "__finish__", {"ok": True, "note": "better than before"}),
        _call("f1", "__finish__", {"text": "hello, world"}),
    ]


def test_the_critic_loop_run_twice_in_one_session_continues_the_critic_under_new_ids(
    make_executor: ExecutorFactory,
) -> None:
    """The README's companion example run a second time with the same session id (same call ids)."""
    writer = _writer()
    executor = make_executor(MockLLMAdapter([*_critic_loop(), *_critic_loop()]), [writer])
    session = unique_name("greeting")
    for turn in (1, 2):
        result = executor.execute(writer, "Write a greeting.", session_id=session).result(timeout_seconds=60)
        assert result.status == "completed", (turn, result.error)
        assert result.output == Draft(text="hello, world")

    critic = f"{session}-agent-critic"
    assert [(r.run_id, r.status) for r in executor.list_runs(critic)] == [
        (f"{critic}-turn-1", "completed"),
        (f"{critic}-continue-1.2-c2", "completed"),
        (f"{critic}-continue-2.1-c1", "completed"),  # turn 2 spawns the completed critic again
        (f"{critic}-continue-2.2-c2", "completed"),
    ]
    state = executor.get_state(critic)
    assert state is not None and state.output == {"ok": True, "note": "better than before"}


def test_a_run_id_taken_by_another_session_is_a_tool_error_not_a_failed_run(make_executor: ExecutorFactory) -> None:
    """Session ids are the caller's: one chosen like a companion's continuation id takes that run id
    first. The consult is then refused with a typed error the model reads, and the parent goes on."""
    from helix_dbos.runtime import starts

    writer = _writer()
    session = unique_name("squat")
    critic = f"{session}-agent-critic"
    squatter = starts.child_first_turn(
        writer, "someone-else", "hi", parent_session_id="x", root_session_id="x", request_key="k",
        fingerprint=None, metadata=None, now_ms=1,
    ).model_copy(update={"run_id": f"{critic}-continue-1.2-c2"})  # fmt: skip
    executor = make_executor(MockLLMAdapter([*_critic_loop()[:3], _critic_loop()[4]]), [writer])
    executor.store.start_run(squatter)

    result = executor.execute(writer, "Write a greeting.", session_id=session).result(timeout_seconds=60)
    assert result.status == "completed", result.error
    state = executor.get_state(session)
    assert state is not None
    [c2] = [m for m in state.messages if isinstance(m, ToolResultMessage) and m.tool_call_id == "c2"]
    assert "Could not start companion 'critic'" in c2.content and "is taken by a run already recorded" in c2.content
    assert "IntegrityError" not in c2.content and "INSERT" not in c2.content
