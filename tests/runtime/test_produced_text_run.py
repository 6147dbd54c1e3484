"""A run whose model and tools produce NUL and lone surrogates completes, and stores them faithfully.

Before issue 9 a tool result holding ``"\\x00"`` failed the run (the step commit was refused) and
the batch of stream chunks it was in, other sessions' chunks included. Now the transcript, the
state, the tool error and the stream all carry the text exactly as produced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, Field

from helix_dbos import MockLLMAdapter, ToolResultMessage, define_agent, define_tool
from helix_dbos.runtime.aio import background_loop
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.stream.chunks import TextDeltaChunk, ToolEndChunk
from helix_dbos.stream.sql import SqlStreamManager
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres

NASTY = "a\x00b \ud800 \udfff \ufdd0 é😀"


class Notes(BaseModel):
    notes: list[str] = Field(default_factory=list)


class TextIn(BaseModel):
    text: str


def produce(inp: TextIn, ctx: object) -> dict[str, str]:
    ctx.update_state(lambda draft: draft.notes.append(inp.text + NASTY))  # type: ignore[attr-defined]
    return {"produced": NASTY}


def explode(inp: TextIn, ctx: object) -> None:
    raise ValueError(f"tool failed on {NASTY}")


agent = define_agent(
    "produced-text",
    system_prompt="Produce.",
    llm_config="scripted/produced",
    state_schema=Notes,
    tools=[
        define_tool("produce", input_schema=TextIn, execute=produce),
        define_tool("explode", input_schema=TextIn, execute=explode),
    ],
)


@pytest.fixture
def manager(runtime_db: str) -> Iterator[SqlStreamManager]:
    manager = SqlStreamManager(runtime_db)
    yield manager
    background_loop.run(manager.aclose())


def test_nul_and_surrogates_from_model_and_tools_do_not_fail_the_run(
    make_executor: ExecutorFactory, manager: SqlStreamManager
) -> None:
    model = MockLLMAdapter(
        [
            ToolCallsStepResult(
                content=f"calling {NASTY}",
                tool_calls=[
                    ParsedToolCall(id="p1", name="produce", arguments={"text": NASTY}),
                    ParsedToolCall(id="x1", name="explode", arguments={"text": NASTY}),
                ],
                stop_reason="tool_use",
            ),
            TextStepResult(content=f"done {NASTY}", should_stop=True, stop_reason="end_turn"),
        ]
    )
    executor = make_executor(model, [agent], stream_manager=manager)
    handle = executor.execute(agent, "go")
    result = handle.result(timeout_seconds=60)
    assert result.status == "completed", result.error
    assert result.output == f"done {NASTY}"

    state = executor.get_state(handle.session_id)
    assert state is not None
    assert state.custom_state == {"notes": [NASTY + NASTY]}
    results = {m.tool_call_id: m for m in state.messages if isinstance(m, ToolResultMessage)}
    assert json.loads(results["p1"].content) == {"produced": NASTY}  # the result as JSON text
    assert NASTY in results["x1"].content
    assert state.messages[-1].content == f"done {NASTY}"  # type: ignore[union-attr]

    records = background_loop.run(manager.read_records(handle.session_id))
    deltas = [r.chunk.content for r in records if isinstance(r.chunk, TextDeltaChunk)]
    assert deltas == [f"calling {NASTY}", f"done {NASTY}"]
    ends = {r.chunk.tool_call_id: r.chunk for r in records if isinstance(r.chunk, ToolEndChunk)}
    assert ends["p1"].result == {"produced": NASTY}
    assert ends["x1"].error is not None and NASTY in ends["x1"].error
    info = background_loop.run(manager.get_stream_info(handle.session_id))
    assert info is not None and info.status == "ended"
