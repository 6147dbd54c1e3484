"""Not-retry-safe tools in a run that does not crash: one marker step, then each call runs once.

The crash behaviour (a recovered run reports the outcome unknown) is ``test_unsafe_tool_crash.py``'s,
with real processes; this pins what such a tool adds to a healthy run's record.
"""

from __future__ import annotations

from typing import Any

import pytest
from dbos import DBOS

from helix_dbos import MockLLMAdapter, ToolContext, ToolResultMessage, define_agent, define_tool
from helix_dbos.step_result import ParsedToolCall, ToolCallsStepResult
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


def test_a_batch_with_a_not_retry_safe_call_records_one_marker_before_its_tool_steps(
    make_executor: ExecutorFactory,
) -> None:
    ran: list[str] = []

    def charge(_: Any, ctx: ToolContext) -> str:
        ran.append(f"charge:{ctx.idempotency_key}")
        return "charged"

    def lookup(_: Any, ctx: ToolContext) -> str:
        ran.append("lookup")
        return "found"

    agent = define_agent(
        "unsafe-batch",
        system_prompt="s",
        llm_config="openai/x",
        tools=[
            define_tool("charge", execute=charge, retry_safe=False),
            define_tool("lookup", execute=lookup),
        ],
    )
    model = MockLLMAdapter(
        [
            ToolCallsStepResult(
                tool_calls=[
                    ParsedToolCall(id="c1", name="lookup", arguments={}),
                    ParsedToolCall(id="c2", name="charge", arguments={}),
                ],
                stop_reason="tool_use",
            ),
            {"type": "text", "content": "done", "should_stop": True, "stop_reason": "end_turn"},
        ]
    )
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    assert handle.result().status == "completed"
    assert sorted(ran) == [f"charge:{handle.session_id}:c2", "lookup"]  # each once
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.run_id)]
    tools = [s for s in steps if ".tool" in s]
    assert tools == ["unsafe-batch.tool_starts", "unsafe-batch.tool.lookup", "unsafe-batch.tool.charge"], steps
    assert "DBOS.patch-helix-unknown-tool-outcomes" in steps
    state = executor.store.load_state(handle.session_id)
    assert state is not None
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.metadata) for m in results] == [("c1", None), ("c2", None)]


def test_a_batch_of_retry_safe_calls_records_no_marker(make_executor: ExecutorFactory) -> None:
    """Retry-safe tools (the default) keep today's record exactly: no marker step, no patch row."""
    agent = define_agent(
        "safe-batch", system_prompt="s", llm_config="openai/x", tools=[define_tool("lookup", execute=lambda i, c: 1)]
    )
    model = MockLLMAdapter(
        [
            {"type": "tool_calls", "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}]},
            {"type": "text", "content": "done", "should_stop": True, "stop_reason": "end_turn"},
        ]
    )
    handle = make_executor(model, [agent]).execute(agent, "go")
    assert handle.result().status == "completed"
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.run_id)]
    assert not any("tool_starts" in s or "unknown-tool-outcomes" in s for s in steps), steps


def test_the_replay_patch_is_asked_once_per_run_and_each_phase_gets_its_marker(make_executor: ExecutorFactory) -> None:
    """Two steps calling a not-retry-safe tool: one patch row (the run's first ask decides), two markers."""
    agent = define_agent(
        "unsafe-twice",
        system_prompt="s",
        llm_config="openai/x",
        tools=[define_tool("charge", execute=lambda i, c: "charged", retry_safe=False)],
    )
    model = MockLLMAdapter(
        [
            {"type": "tool_calls", "tool_calls": [{"id": "c1", "name": "charge", "arguments": {}}]},
            {"type": "tool_calls", "tool_calls": [{"id": "c2", "name": "charge", "arguments": {}}]},
            {"type": "text", "content": "done", "should_stop": True, "stop_reason": "end_turn"},
        ]
    )
    handle = make_executor(model, [agent]).execute(agent, "go")
    assert handle.result().status == "completed"
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.run_id)]
    assert steps.count("DBOS.patch-helix-unknown-tool-outcomes") == 1, steps
    assert [s for s in steps if ".tool" in s] == ["unsafe-twice.tool_starts", "unsafe-twice.tool.charge"] * 2
