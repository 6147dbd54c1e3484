"""``ToolContext.abort_signal`` is tripped by ``abort`` and ``interrupt`` (issue 9 item 6)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, define_agent, define_tool
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.store.engine import now_ms
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class Empty(BaseModel):
    pass


class Watcher:
    """A tool that polls its abort signal until it trips (or 15 s pass) and reports what it saw."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.seen: list[tuple[str | None, float]] = []

    def __call__(self, inp: Empty, ctx: Any) -> dict[str, Any]:
        self.entered.set()
        started = time.monotonic()
        while not ctx.abort_signal.aborted and time.monotonic() - started < 15:
            time.sleep(0.01)
        self.seen.append((ctx.abort_signal.reason, time.monotonic()))
        return {"stopped": ctx.abort_signal.reason}


def watching_agent(name: str, watcher: Watcher) -> Any:
    return define_agent(
        name,
        system_prompt="x",
        llm_config="openai/fake",
        tools=[define_tool("watch", input_schema=Empty, execute=watcher)],
    )


def script() -> MockLLMAdapter:
    return MockLLMAdapter(
        [
            ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id="w1", name="watch", arguments={})], stop_reason="tool_use"
            ),
            TextStepResult(content="never reached", should_stop=True, stop_reason="end_turn"),
        ]
    )


def start(make_executor: ExecutorFactory, name: str) -> tuple[DBOSAgentExecutor, Watcher, Any]:
    watcher = Watcher()
    agent = watching_agent(name, watcher)
    executor = make_executor(script(), [agent])
    handle = executor.execute(agent, "go")
    assert watcher.entered.wait(10)
    return executor, watcher, handle


def test_abort_trips_a_running_tools_signal(make_executor: ExecutorFactory) -> None:
    executor, watcher, handle = start(make_executor, "abort-watch")
    asked = time.monotonic()
    executor.abort(handle.session_id, "user left")
    deadline = time.monotonic() + 5
    while not watcher.seen and time.monotonic() < deadline:
        time.sleep(0.01)
    (reason, at), *_ = watcher.seen
    assert reason == "aborted: user left"
    assert at - asked < 1.0
    assert handle.outcome(timeout_seconds=10).kind == "aborted"


def test_interrupt_trips_a_running_tools_signal_and_the_run_stops_interrupted(make_executor: ExecutorFactory) -> None:
    executor, watcher, handle = start(make_executor, "interrupt-watch")
    asked = time.monotonic()
    assert executor.interrupt(handle.session_id, "coffee")
    result = handle.result(timeout_seconds=10)
    assert result.status == "interrupted"
    (reason, at), *_ = watcher.seen
    assert reason == "interrupted: coffee" and at - asked < 1.0
    # The tool's answer is kept: the transcript pairs the call, and a resume continues from it.
    tool_results = [m for m in handle.get_state().messages if m.role == "tool"]
    assert [m.content for m in tool_results] == ['{"stopped":"interrupted: coffee"}']


def test_a_flag_set_by_another_process_reaches_the_tool(make_executor: ExecutorFactory) -> None:
    """Another worker's ``interrupt`` writes only the durable flag; the signal's probe reads it."""
    executor, watcher, handle = start(make_executor, "remote-watch")
    asked = time.monotonic()
    assert executor.store.request_interrupt(handle.session_id, "from worker 2", now_ms=now_ms())
    assert handle.result(timeout_seconds=10).status == "interrupted"
    (reason, at), *_ = watcher.seen
    assert reason == "interrupted: from worker 2"
    assert at - asked < 1.5  # the probe looks at most every 0.25 s
