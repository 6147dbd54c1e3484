from typing import Any

import pytest
from pydantic import ValidationError

from helix_dbos.errors import HelixError
from helix_dbos.llm.base import LLMAdapter, LLMGenerateInput, LLMStreamCallbacks
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.mock import MockLLMAdapter
from helix_dbos.messages import Message, UserMessage
from helix_dbos.step_result import (
    ErrorStepResult,
    ParsedToolCall,
    StepResult,
    StructuredOutputStepResult,
    TextStepResult,
    ToolCallsStepResult,
)


def _input(messages: list[Message] | None = None, callbacks: LLMStreamCallbacks | None = None) -> LLMGenerateInput:
    return LLMGenerateInput(
        messages=messages if messages is not None else [UserMessage(content="hi")],
        tools=[],
        config=LLMConfig(model="openai/fake"),
        agent_id="run-1",
        agent_type="tester",
        callbacks=callbacks,
    )


class _Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []

    def callbacks(self) -> LLMStreamCallbacks:
        return LLMStreamCallbacks(
            on_text_delta=lambda d: self.items.append(("text", d)),
            on_thinking=lambda c, done: self.items.append(("thinking", (c, done))),
            on_tool_call=lambda call: self.items.append(("tool", call.name)),
            on_error=lambda e: self.items.append(("error", e)),
        )


async def test_scripted_responses_in_order_from_models_and_dicts() -> None:
    mock = MockLLMAdapter(
        [
            {"type": "text", "content": "Hello!"},
            {"type": "tool_calls", "tool_calls": [{"id": "t1", "name": "search", "arguments": {}}]},
            {"type": "structured_output", "output": {"result": "done"}},
            TextStepResult(content="bye", should_stop=True),
        ]
    )
    results = [await mock.generate_step(_input()) for _ in range(4)]
    assert isinstance(results[0], TextStepResult) and results[0].content == "Hello!"
    assert isinstance(results[1], ToolCallsStepResult) and results[1].tool_calls[0].name == "search"
    assert isinstance(results[2], StructuredOutputStepResult) and results[2].output == {"result": "done"}
    assert isinstance(results[3], TextStepResult) and results[3].should_stop
    assert mock.call_count == 4
    assert mock.remaining == 0


async def test_runs_out_loudly() -> None:
    mock = MockLLMAdapter([{"type": "text", "content": "one"}])
    await mock.generate_step(_input())
    with pytest.raises(HelixError) as info:
        await mock.generate_step(_input())
    assert info.value.code == "framework_internal_error"
    assert "ran out of scripted responses (call 2" in str(info.value)
    assert mock.call_count == 2


def test_invalid_dict_fails_at_setup() -> None:
    with pytest.raises(ValidationError):
        MockLLMAdapter([{"type": "text"}])
    with pytest.raises(ValidationError):
        MockLLMAdapter().add_response({"type": "nope", "content": "x"})


async def test_records_inputs_and_copies_lists() -> None:
    mock = MockLLMAdapter().add_response({"type": "text", "content": "a"}, {"type": "text", "content": "b"})
    assert mock.get_last_input() is None
    messages: list[Message] = [UserMessage(content="first")]
    await mock.generate_step(_input(messages))
    messages.append(UserMessage(content="later"))
    await mock.generate_step(_input([UserMessage(content="second")]))
    assert len(mock.inputs) == 2
    assert [m.content for m in mock.inputs[0].messages] == ["first"]
    last = mock.get_last_input()
    assert last is not None and last.messages[0].content == "second"
    assert last.agent_type == "tester"


async def test_callable_responses_sync_and_async() -> None:
    def echo(inp: LLMGenerateInput) -> StepResult:
        return TextStepResult(content=f"echo:{inp.messages[-1].content}")

    async def later(inp: LLMGenerateInput) -> dict[str, Any]:
        return {"type": "text", "content": f"n={len(inp.messages)}"}

    mock = MockLLMAdapter([echo, later])
    first = await mock.generate_step(_input([UserMessage(content="ping")]))
    second = await mock.generate_step(_input([UserMessage(content="a"), UserMessage(content="b")]))
    assert isinstance(first, TextStepResult) and first.content == "echo:ping"
    assert isinstance(second, TextStepResult) and second.content == "n=2"


async def test_fires_callbacks_like_a_stream() -> None:
    events = _Events()
    mock = MockLLMAdapter(
        [
            {"type": "text", "content": "Hi there", "thinking": {"content": "hmm"}},
            {
                "type": "tool_calls",
                "content": "calling",
                "tool_calls": [{"id": "1", "name": "a"}, {"id": "2", "name": "b"}],
                "sub_agent_calls": [{"id": "3", "agent_type": "researcher", "input": {"q": 1}}],
            },
            {"type": "structured_output", "output": 1},
        ]
    )
    for _ in range(3):
        await mock.generate_step(_input(callbacks=events.callbacks()))
    assert events.items == [
        ("thinking", ("hmm", False)),
        ("thinking", ("", True)),
        ("text", "Hi there"),
        ("text", "calling"),
        ("tool", "a"),
        ("tool", "b"),
        ("tool", "subagent__researcher"),
    ]


async def test_async_callbacks_are_awaited() -> None:
    seen: list[str] = []

    async def on_text(delta: str) -> None:
        seen.append(delta)

    async def on_tool(call: ParsedToolCall) -> None:
        seen.append(call.id)

    mock = MockLLMAdapter(
        [{"type": "tool_calls", "content": "x", "tool_calls": [{"id": "c1", "name": "a", "arguments": {}}]}]
    )
    await mock.generate_step(_input(callbacks=LLMStreamCallbacks(on_text_delta=on_text, on_tool_call=on_tool)))
    assert seen == ["x", "c1"]


async def test_error_results_are_returned_not_raised() -> None:
    mock = MockLLMAdapter([ErrorStepResult(error=HelixError("boom", code="provider_overloaded"))])
    result = await mock.generate_step(_input())
    assert isinstance(result, ErrorStepResult)
    assert isinstance(result.error, HelixError) and result.error.code == "provider_overloaded"


async def test_results_are_copies() -> None:
    scripted = ToolCallsStepResult(tool_calls=[ParsedToolCall(id="1", name="a", arguments={"k": 1})])
    mock = MockLLMAdapter([scripted])
    result = await mock.generate_step(_input())
    assert isinstance(result, ToolCallsStepResult)
    result.tool_calls[0].arguments["k"] = 2
    assert scripted.tool_calls[0].arguments == {"k": 1}


def test_satisfies_the_protocol() -> None:
    assert isinstance(MockLLMAdapter(), LLMAdapter)
