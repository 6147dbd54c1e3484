"""A finished run's stream is ended before its outcome is published.

A caller that learns the outcome (``result()``, from any process: the outcome event) may start
the session's next turn at once, on the same stream. Were the previous run's stream end still to
come, it would land on the stream the next turn had just reopened, and the next turn's chunks
would be refused as written to an ended stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dbos import DBOS

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SqlSessionStore, define_agent, define_tool
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.streaming import RunStreams
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.stream.sql import SqlStreamManager

pytestmark = pytest.mark.postgres

agent = define_agent(
    "stream-end-order",
    system_prompt="Answer.",
    llm_config="scripted/order",
    tools=[define_tool("pause", execute=lambda inp, ctx: time.sleep(0.6) or {"ok": True})],
)


@pytest.fixture
def executor(runtime_db: str) -> Iterator[Callable[[MockLLMAdapter], tuple[DBOSAgentExecutor, SqlStreamManager]]]:
    made: list[tuple[DBOSAgentExecutor, SqlStreamManager]] = []

    def factory(model: MockLLMAdapter) -> tuple[DBOSAgentExecutor, SqlStreamManager]:
        store = SqlSessionStore(runtime_db)
        manager = SqlStreamManager(store.engine)
        made.append((DBOSAgentExecutor(store, llm_adapter=model, agents=[agent], stream_manager=manager), manager))
        return made[-1]

    yield factory
    for ex, manager in made:
        ex.close()
        background_loop.run(manager.aclose())
        ex.store.close()


def test_the_next_turn_started_on_the_outcome_keeps_its_stream(
    executor: Callable[[MockLLMAdapter], tuple[DBOSAgentExecutor, SqlStreamManager]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = MockLLMAdapter(
        [
            TextStepResult(content="first", should_stop=True, stop_reason="end_turn"),
            ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id="p", name="pause", arguments={})], stop_reason="tool_use"
            ),
            TextStepResult(content="second", should_stop=True, stop_reason="end_turn"),
        ]
    )
    ex, manager = executor(model)
    real_end = RunStreams.end

    def slow_end(self: RunStreams, stream_id: str, output: Any = None) -> None:
        time.sleep(0.3)  # a stream end that takes a while to land (a loaded machine, a slow database)
        real_end(self, stream_id, output)

    monkeypatch.setattr(RunStreams, "end", slow_end)
    first = ex.execute(agent, "one", session_id="stream-end-order")
    # With a timeout the outcome comes from the outcome event, as for a caller in another process.
    assert first.result(timeout_seconds=60).status == "completed"
    second = ex.execute(agent, "two", session_id="stream-end-order")
    assert second.result(timeout_seconds=60).status == "completed"

    for handle in (first, second):  # both workflows done (their last steps) before the fixtures close
        DBOS.retrieve_workflow(handle.workflow_id).get_result()

    records = background_loop.run(manager.read_records("stream-end-order"))
    types = [r.chunk.type for r in records if r.chunk.agent_id == second.run_id]
    assert "tool_end" in types and types[-1] == "output", types
