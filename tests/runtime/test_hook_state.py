"""Hooks may change the custom state (seed 001 "Hook customState reconcile"; issue 17 item 3).

``before_tool`` changes join the tool's step writes; ``after_tool`` / ``on_message`` changes are the
``{agent}.hooks`` step's recorded writes: merged, streamed as ``state_patch``, committed, and applied
once when DBOS replays the run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel, Field

from helix_dbos import AgentHooks, MockLLMAdapter, define_agent, define_tool
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.stream.chunks import StatePatchChunk
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class Log(BaseModel):
    entries: list[str] = Field(default_factory=list)
    messages: int = 0


class CityIn(BaseModel):
    city: str


def calls(*items: tuple[str, str, dict[str, Any]]) -> ToolCallsStepResult:
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in items], stop_reason="tool_use"
    )


def said(text: str) -> TextStepResult:
    return TextStepResult(content=text, should_stop=True, stop_reason="end_turn")


def _hooks() -> AgentHooks:
    def count(draft: Log) -> None:
        draft.messages += 1

    return AgentHooks(
        before_tool=lambda p: p.update_state(lambda d: d.entries.append(f"before:{p.tool_call_id}")),
        after_tool=lambda p: p.update_state(lambda d: d.entries.append(f"after:{p.tool_call_id}:{p.success}")),
        on_message=lambda p: p.update_state(count),
    )


def _visit(inp: CityIn, ctx: Any) -> str:
    ctx.update_state(lambda d: d.entries.append(f"tool:{inp.city}"))
    return inp.city


def test_hook_state_changes_are_recorded_streamed_and_committed(make_executor: ExecutorFactory) -> None:
    agent = define_agent(
        "hook-state",
        system_prompt="x",
        llm_config="openai/fake",
        state_schema=Log,
        tools=[define_tool("visit", input_schema=CityIn, execute=_visit)],
        hooks=_hooks(),
    )
    model = MockLLMAdapter([calls(("t1", "visit", {"city": "Oslo"})), said("done")])
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    assert handle.result().status == "completed"
    state = handle.get_state().custom_state
    assert state["entries"] == ["before:t1", "tool:Oslo", "after:t1:True"]
    # on_message: the assistant tool call and the tool result (flushed after the batch), then the
    # final assistant message (flushed before finalize). The user message precedes the hooks plan.
    assert state["messages"] == 3

    async def collect() -> list[Any]:
        stream = await handle.stream()
        assert stream is not None
        return [chunk async for chunk in stream]

    patches = [c.patches for c in asyncio.run(collect()) if isinstance(c, StatePatchChunk)]
    flat = [op for p in patches for op in p]
    assert {"op": "add", "path": "/entries/-", "value": "after:t1:True"} in flat  # streamed as a patch
    assert any(op["path"] == "/messages" for op in flat)
    # Committed: a fresh store read (the session row) sees it.
    record = executor.store.load_session(handle.session_id)
    assert record is not None and record.custom_state == state


def test_hook_state_changes_are_applied_once_when_the_run_is_replayed(make_executor: ExecutorFactory) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(inp: CityIn, ctx: Any) -> str:
        if inp.city == "Oslo":  # the second batch: the first batch's hooks step is recorded by now
            entered.set()
            release.wait(10)
        return _visit(inp, ctx)

    agent = define_agent(
        "hook-state-replay",
        system_prompt="x",
        llm_config="openai/fake",
        state_schema=Log,
        tools=[define_tool("visit", input_schema=CityIn, execute=slow)],
        hooks=_hooks(),
    )
    model = MockLLMAdapter(
        [calls(("t0", "visit", {"city": "Bergen"})), calls(("t1", "visit", {"city": "Oslo"})), said("done")]
    )
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    assert entered.wait(10)
    DBOS.cancel_workflow(handle.workflow_id)
    release.set()
    deadline = time.monotonic() + 10
    while DBOS.get_workflow_status(handle.workflow_id).status != "CANCELLED" and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    DBOS.resume_workflow(handle.workflow_id)
    assert handle.result(timeout_seconds=30).status == "completed"
    state = handle.get_state().custom_state
    assert state["entries"][:3] == ["before:t0", "tool:Bergen", "after:t0:True"]  # once, not twice
    assert state["entries"].count("after:t0:True") == 1
    assert state["entries"][-1] == "after:t1:True"
    assert state["messages"] == 5  # 2 per batch + the final answer, each counted once
