"""The real LiteLLMAdapter, through real litellm, against the scripted OpenAI-compatible server."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos.errors import HelixError
from helix_dbos.llm.base import LLMAdapter, LLMGenerateInput, LLMStreamCallbacks
from helix_dbos.llm.caching import anthropic_cache, openai_cache, xai_cache
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.litellm import (
    LiteLLMAdapter,
    classify_provider_error,
    retry_delay_seconds,
    to_strict_json_schema,
)
from helix_dbos.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkingContent,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from helix_dbos.step_result import ErrorStepResult, StepResult, TextStepResult, ToolCallsStepResult
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer, ScriptedResponse, ScriptedToolCall
from helix_dbos.tool import FINISH_TOOL_NAME, Tool, create_finish_tool, define_tool

# -- fixtures and helpers ------------------------------------------------------------------------


class WeatherInput(BaseModel):
    city: str
    unit: str = "c"
    days: int | None = None


class Address(BaseModel):
    street: str
    zip: str | None = None


class Report(BaseModel):
    title: str
    address: Address
    tags: list[str] = []


WEATHER = define_tool("get_weather", description="Get weather", input_schema=WeatherInput, execute=lambda i, c: "sunny")
STRICT_WEATHER = define_tool(
    "get_weather",
    description="Get weather",
    input_schema=WeatherInput,
    execute=lambda i, c: "sunny",
    strict=True,
)
SEARCH = define_tool("search", description="Search", execute=lambda i, c: [])


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


class Sleeps:
    """A fast, recording replacement for asyncio.sleep."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []

    def of(self, kind: str) -> list[Any]:
        return [value for k, value in self.items if k == kind]

    def callbacks(self) -> LLMStreamCallbacks:
        return LLMStreamCallbacks(
            on_text_delta=lambda d: self.items.append(("text", d)),
            on_thinking=lambda c, done: self.items.append(("thinking", (c, done))),
            on_tool_call=lambda call: self.items.append(("tool", call)),
            on_error=lambda e: self.items.append(("error", e)),
        )


def config(server: ScriptedOpenAIServer, **overrides: Any) -> LLMConfig:
    fields: dict[str, Any] = {
        "model": "openai/fake",
        "api_base": server.base_url,
        "api_key": "test",
        "timeout_seconds": 10,
        "max_retries": 2,
    }
    fields.update(overrides)
    return LLMConfig(**fields)


def gen_input(
    cfg: LLMConfig,
    *,
    messages: list[Message] | None = None,
    tools: list[Tool] | None = None,
    events: Events | None = None,
    session_id: str | None = "session-1",
) -> LLMGenerateInput:
    return LLMGenerateInput(
        messages=messages or [SystemMessage(content="You are terse."), UserMessage(content="Hi")],
        tools=tools or [],
        config=cfg,
        agent_id="run-1",
        agent_type="tester",
        session_id=session_id,
        callbacks=events.callbacks() if events else None,
    )


async def run(
    server: ScriptedOpenAIServer,
    *scripted: ScriptedResponse | dict[str, Any],
    stream: bool = True,
    sleeps: Sleeps | None = None,
    events: Events | None = None,
    tools: list[Tool] | None = None,
    messages: list[Message] | None = None,
    **config_overrides: Any,
) -> StepResult:
    server.add(*scripted)
    adapter = LiteLLMAdapter(stream=stream, sleep=sleeps or Sleeps())
    return await adapter.generate_step(
        gen_input(config(server, **config_overrides), tools=tools, events=events, messages=messages)
    )


def error_of(result: StepResult) -> HelixError:
    assert isinstance(result, ErrorStepResult), result
    assert result.should_stop
    assert isinstance(result.error, HelixError)
    return result.error


# -- text, tools, reasoning, usage ---------------------------------------------------------------


async def test_streamed_text_arrives_as_deltas(server: ScriptedOpenAIServer) -> None:
    events = Events()
    result = await run(server, {"text": "Hello there, world"}, events=events)
    assert isinstance(result, TextStepResult)
    assert result.content == "Hello there, world"
    assert result.should_stop and result.stop_reason == "end_turn"
    assert events.of("text") == ["Hello ", "there, ", "world"]
    body = server.requests[0]
    assert body["model"] == "fake"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"},
    ]
    assert "tools" not in body
    assert server.request_headers[0]["authorization"] == "Bearer test"


async def test_non_streaming(server: ScriptedOpenAIServer) -> None:
    events = Events()
    result = await run(server, {"text": "Plain answer"}, stream=False, events=events)
    assert isinstance(result, TextStepResult) and result.content == "Plain answer"
    assert events.of("text") == ["Plain answer"]
    assert not server.requests[0].get("stream")


@pytest.mark.parametrize("stream", [True, False])
async def test_parallel_tool_calls_and_sub_agents(server: ScriptedOpenAIServer, stream: bool) -> None:
    events = Events()
    result = await run(
        server,
        {
            "text": "Let me check.",
            "tool_calls": [
                ("get_weather", {"city": "Paris"}),
                ScriptedToolCall("search", {"q": "x"}, id="call_custom"),
                {"name": "subagent__researcher", "arguments": {"topic": "rain"}},
            ],
        },
        stream=stream,
        events=events,
        tools=[WEATHER, SEARCH],
    )
    assert isinstance(result, ToolCallsStepResult)
    assert result.content == "Let me check."
    assert result.stop_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_custom", "search", {"q": "x"}),
    ]
    assert [(s.id, s.agent_type, s.input) for s in result.sub_agent_calls] == [
        ("call_2", "researcher", {"topic": "rain"})
    ]
    assert [c.name for c in events.of("tool")] == ["get_weather", "search", "subagent__researcher"]
    tools = server.requests[0]["tools"]
    assert [t["function"]["name"] for t in tools] == ["get_weather", "search"]
    assert tools[0]["type"] == "function"
    assert tools[0]["function"]["description"] == "Get weather"
    assert tools[0]["function"]["parameters"]["required"] == ["city"]
    assert "strict" not in tools[0]["function"]


async def test_tool_calls_with_stop_finish_reason_are_still_tool_calls(server: ScriptedOpenAIServer) -> None:
    result = await run(server, {"tool_calls": [("search", {})], "finish_reason": "stop"}, tools=[SEARCH])
    assert isinstance(result, ToolCallsStepResult)
    assert result.stop_reason == "tool_use"
    assert result.tool_calls[0].arguments == {}


@pytest.mark.parametrize("stream", [True, False])
async def test_reasoning_and_usage(server: ScriptedOpenAIServer, stream: bool) -> None:
    events = Events()
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    result = await run(
        server, {"reasoning": "Think it through", "text": "42", "usage": usage}, stream=stream, events=events
    )
    assert isinstance(result, TextStepResult)
    assert result.thinking is not None and result.thinking.content == "Think it through"
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (120, 30)
    assert (result.usage.cached_input_tokens, result.usage.reasoning_tokens) == (100, 12)
    thinking = events.of("thinking")
    assert thinking[-1] == ("", True)
    assert "".join(c for c, done in thinking if not done) == "Think it through"
    # reasoning is reported before the text that follows it
    kinds = [k for k, _ in events.items]
    assert kinds.index("thinking") < kinds.index("text")


async def test_length_finish_reason(server: ScriptedOpenAIServer) -> None:
    result = await run(server, {"text": "cut", "finish_reason": "length"})
    assert isinstance(result, TextStepResult)
    assert result.stop_reason == "max_tokens" and not result.should_stop


# -- request shaping -----------------------------------------------------------------------------


async def test_history_is_sent_as_explicit_openai_dicts(server: ScriptedOpenAIServer) -> None:
    history: list[Message] = [
        SystemMessage(content="sys"),
        UserMessage(content="weather?", metadata={"source": "ui"}),
        AssistantMessage(
            content=None,
            tool_calls=[ToolCallRequest(id="c1", name="get_weather", arguments={"city": "Oslo"})],
            thinking=ThinkingContent(content="need weather", signature="sig"),
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="get_weather", content='"sunny"'),
        AssistantMessage(content="Sunny."),
        UserMessage(content="thanks"),
    ]
    await run(server, {"text": "ok"}, messages=history, tools=[WEATHER])
    assert server.requests[0]["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",  # the openai SDK drops content=None on the wire
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '"sunny"'},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "thanks"},
    ]


async def test_strict_tool_gets_strict_schema(server: ScriptedOpenAIServer) -> None:
    result = await run(
        server,
        {"tool_calls": [("get_weather", {"city": "Rome", "unit": None, "days": None})]},
        tools=[STRICT_WEATHER, SEARCH],
    )
    weather, search = server.requests[0]["tools"]
    assert weather["function"]["strict"] is True
    params = weather["function"]["parameters"]
    assert params["additionalProperties"] is False
    assert params["required"] == ["city", "unit", "days"]
    assert params["properties"]["unit"]["type"] == ["string", "null"]
    assert "default" not in json.dumps(params)
    assert "strict" not in search["function"]
    # null for a field whose real schema forbids it is dropped (its default applies);
    # null for a genuinely nullable field is kept
    assert isinstance(result, ToolCallsStepResult)
    assert result.tool_calls[0].arguments == {"city": "Rome", "days": None}
    assert STRICT_WEATHER.validate_input(result.tool_calls[0].arguments).unit == "c"


@pytest.mark.parametrize("strict_output", [True, False])
async def test_finish_tool_strict_follows_strict_output(server: ScriptedOpenAIServer, strict_output: bool) -> None:
    finish = create_finish_tool(Report, strict=strict_output)
    result = await run(
        server,
        {"tool_calls": [(FINISH_TOOL_NAME, {"title": "t", "address": {"street": "s", "zip": None}, "tags": None})]},
        tools=[finish],
        strict_output=strict_output,
    )
    function = server.requests[0]["tools"][0]["function"]
    assert isinstance(result, ToolCallsStepResult)
    if strict_output:
        assert function["strict"] is True
        params = function["parameters"]
        assert params["additionalProperties"] is False
        assert set(params["required"]) == {"title", "address", "tags"}
        address = params["$defs"]["Address"]
        assert address["additionalProperties"] is False
        assert address["required"] == ["street", "zip"]
        # nested nulls: zip is Optional (kept), tags had a default (dropped)
        assert result.tool_calls[0].arguments == {"title": "t", "address": {"street": "s", "zip": None}}
    else:
        assert "strict" not in function
        assert result.tool_calls[0].arguments["tags"] is None


async def test_strict_is_capability_gated_by_provider(server: ScriptedOpenAIServer) -> None:
    server.add({"text": "ok"})
    adapter = LiteLLMAdapter(sleep=Sleeps(), strict_tool_providers=frozenset({"some_other_provider"}))
    await adapter.generate_step(gen_input(config(server), tools=[STRICT_WEATHER]))
    function = server.requests[0]["tools"][0]["function"]
    assert "strict" not in function
    assert function["parameters"]["required"] == ["city"]


async def test_config_and_provider_options_are_forwarded(server: ScriptedOpenAIServer) -> None:
    await run(
        server,
        {"text": "ok"},
        temperature=0.3,
        max_output_tokens=77,
        provider_options={
            "openai": {"top_p": 0.5, "seed": 7, "extra_headers": {"x-trace": "t1"}},
            "anthropic": {"top_k": 3},
        },
    )
    body = server.requests[0]
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 77
    assert body["top_p"] == 0.5 and body["seed"] == 7
    assert "top_k" not in body
    assert "num_retries" not in body and "timeout" not in body
    assert server.request_headers[0]["x-trace"] == "t1"


async def test_reserved_provider_options_are_rejected(server: ScriptedOpenAIServer) -> None:
    with pytest.raises(HelixError) as info:
        await run(server, {"text": "ok"}, provider_options={"openai": {"stream": False}})
    assert info.value.code == "validation_error"
    assert server.request_count == 0


async def test_cache_strategies_apply(server: ScriptedOpenAIServer) -> None:
    await run(server, {"text": "ok"}, cache=[anthropic_cache(), openai_cache(), xai_cache()], tools=[WEATHER])
    body = server.requests[0]
    assert body["prompt_cache_key"] == "session-1"
    assert server.request_headers[0]["x-grok-conv-id"] == "session-1"
    # Anthropic markers are not sent to an OpenAI model
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert "cache_control" not in body["tools"][0]


# -- errors and retries --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
async def test_rate_limit_then_success_honours_retry_after(
    server: ScriptedOpenAIServer, sleeps: Sleeps, stream: bool
) -> None:
    events = Events()
    result = await run(
        server,
        {"status": 429, "error_message": "slow down", "headers": {"Retry-After": "1.5"}},
        {"text": "finally"},
        stream=stream,
        sleeps=sleeps,
        events=events,
    )
    assert isinstance(result, TextStepResult) and result.content == "finally"
    assert server.request_count == 2
    assert sleeps.delays == [1.5]
    [error] = events.of("error")
    assert isinstance(error, HelixError) and error.code == "provider_rate_limited"


async def test_backoff_without_retry_after(server: ScriptedOpenAIServer, sleeps: Sleeps) -> None:
    result = await run(server, {"status": 500}, {"status": 502}, {"text": "ok"}, sleeps=sleeps)
    assert isinstance(result, TextStepResult)
    assert server.request_count == 3
    assert 0.25 <= sleeps.delays[0] <= 0.5
    assert 0.5 <= sleeps.delays[1] <= 1.0


async def test_retries_exhausted_returns_error_step(server: ScriptedOpenAIServer, sleeps: Sleeps) -> None:
    result = await run(server, *[{"status": 500, "error_message": "boom"}] * 3, sleeps=sleeps, max_retries=2)
    error = error_of(result)
    assert error.code == "provider_error" and error.retryable
    assert error.status_code == 500
    assert server.request_count == 3
    assert len(sleeps.delays) == 2
    assert result.stop_reason == "error"


@pytest.mark.parametrize(
    ("status", "message", "code", "retryable"),
    [
        (401, "Incorrect API key provided", "provider_auth_error", False),
        (403, "forbidden", "provider_auth_error", False),
        (400, "bad field", "provider_invalid_request", False),
        (422, "unprocessable", "provider_invalid_request", False),
        (404, "no such model", "provider_invalid_request", False),
        (
            400,
            "This model's maximum context length is 10 tokens. However, you requested 99",
            "provider_context_window_exceeded",
            False,
        ),
        (
            400,
            "Your request was rejected as a result of our safety system",
            "provider_content_filtered",
            False,
        ),
    ],
)
async def test_non_retryable_errors_are_not_retried(
    server: ScriptedOpenAIServer, sleeps: Sleeps, status: int, message: str, code: str, retryable: bool
) -> None:
    result = await run(server, {"status": status, "error_message": message}, sleeps=sleeps)
    error = error_of(result)
    assert (error.code, error.retryable, error.status_code) == (code, retryable, status)
    assert server.request_count == 1
    assert sleeps.delays == []
    if status == 401:
        assert "OPENAI_API_KEY" in error.message
    if "context length" in message:
        assert "context window" in error.message


@pytest.mark.parametrize(("status", "code"), [(529, "provider_overloaded"), (503, "provider_overloaded")])
async def test_overloaded(server: ScriptedOpenAIServer, sleeps: Sleeps, status: int, code: str) -> None:
    result = await run(server, {"status": status, "error_message": "Overloaded"}, sleeps=sleeps, max_retries=0)
    error = error_of(result)
    assert error.code == code and error.retryable
    assert server.request_count == 1


async def test_missing_credentials_name_the_env_var(
    server: ScriptedOpenAIServer, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    adapter = LiteLLMAdapter(sleep=sleeps)
    result = await adapter.generate_step(
        gen_input(LLMConfig(model="openai/gpt-4o-mini", api_base=server.base_url, max_retries=3))
    )
    error = error_of(result)
    assert error.code == "provider_auth_error" and not error.retryable
    assert "missing" in error.message.lower() and "OPENAI_API_KEY" in error.message
    assert server.request_count == 0
    assert sleeps.delays == []


async def test_truncated_stream_with_broken_tool_json_is_retried(server: ScriptedOpenAIServer, sleeps: Sleeps) -> None:
    events = Events()
    result = await run(
        server,
        {
            "text": "calling",
            "tool_calls": [("get_weather", {"city": "Paris", "unit": "c"})],
            "drop_after_chunks": 6,
        },
        {"tool_calls": [("get_weather", {"city": "Paris"})]},
        sleeps=sleeps,
        events=events,
        tools=[WEATHER],
    )
    assert isinstance(result, ToolCallsStepResult)
    assert result.tool_calls[0].arguments == {"city": "Paris"}
    assert server.request_count == 2
    [error] = events.of("error")
    assert error.code == "provider_error" and "truncated tool-call arguments" in error.message
    # the broken call of the first attempt was never reported
    assert [c.arguments for c in events.of("tool")] == [{"city": "Paris"}]


async def test_truncated_text_stream_is_retried(server: ScriptedOpenAIServer, sleeps: Sleeps) -> None:
    result = await run(server, {"text": "one two three four", "drop_after_chunks": 3}, {"text": "whole"}, sleeps=sleeps)
    assert isinstance(result, TextStepResult) and result.content == "whole"
    assert server.request_count == 2


async def test_truncated_stream_exhausted(server: ScriptedOpenAIServer, sleeps: Sleeps) -> None:
    broken = {"tool_calls": [("get_weather", {"city": "Paris"})], "drop_after_chunks": 3}
    result = await run(server, broken, broken, sleeps=sleeps, tools=[WEATHER], max_retries=1)
    error = error_of(result)
    assert error.code == "provider_error" and error.retryable
    assert server.request_count == 2


# Python's parser accepts Infinity/NaN; JSON (and the stores) do not, so that is broken JSON too.
@pytest.mark.parametrize("raw_arguments", ['{"q": ', '{"q": Infinity}'])
async def test_broken_json_in_non_stream_response_is_retried(
    server: ScriptedOpenAIServer, sleeps: Sleeps, raw_arguments: str
) -> None:
    result = await run(
        server,
        {"tool_calls": [("search", {})], "raw_arguments": raw_arguments},
        {"tool_calls": [("search", {"q": "ok"})]},
        stream=False,
        sleeps=sleeps,
        tools=[SEARCH],
    )
    assert isinstance(result, ToolCallsStepResult) and result.tool_calls[0].arguments == {"q": "ok"}
    assert server.request_count == 2


async def test_broken_json_cut_by_max_tokens_is_not_retried(server: ScriptedOpenAIServer, sleeps: Sleeps) -> None:
    result = await run(
        server,
        {"tool_calls": [("search", {})], "raw_arguments": '{"q": "long', "finish_reason": "length"},
        sleeps=sleeps,
        tools=[SEARCH],
    )
    assert isinstance(result, ToolCallsStepResult)
    assert result.stop_reason == "max_tokens"
    assert result.tool_calls[0].arguments == '{"q": "long'
    assert server.request_count == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_timeout(server: ScriptedOpenAIServer, sleeps: Sleeps, stream: bool) -> None:
    result = await run(
        server,
        {"text": "late", "delay_seconds": 3},
        stream=stream,
        sleeps=sleeps,
        timeout_seconds=0.3,
        max_retries=0,
    )
    error = error_of(result)
    assert error.code == "provider_timeout" and error.retryable


async def test_connection_refused(sleeps: Sleeps) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cfg = LLMConfig(model="openai/fake", api_base=f"http://127.0.0.1:{port}/v1", api_key="t", max_retries=1)
    result = await LiteLLMAdapter(sleep=sleeps).generate_step(gen_input(cfg))
    error = error_of(result)
    assert error.code == "provider_error" and error.retryable
    assert len(sleeps.delays) == 1


async def test_callback_errors_propagate_and_are_not_retried(server: ScriptedOpenAIServer, sleeps: Sleeps) -> None:
    def explode(delta: str) -> None:
        raise RuntimeError("stream backend down")

    server.add({"text": "hello world"})
    inp = gen_input(config(server))
    inp.callbacks = LLMStreamCallbacks(on_text_delta=explode)
    with pytest.raises(RuntimeError, match="stream backend down"):
        await LiteLLMAdapter(sleep=sleeps).generate_step(inp)
    assert server.request_count == 1


async def test_async_callbacks(server: ScriptedOpenAIServer) -> None:
    seen: list[str] = []

    async def on_text(delta: str) -> None:
        await asyncio.sleep(0)
        seen.append(delta)

    server.add({"text": "a b c"})
    inp = gen_input(config(server))
    inp.callbacks = LLMStreamCallbacks(on_text_delta=on_text)
    await LiteLLMAdapter().generate_step(inp)
    assert "".join(seen) == "a b c"


async def test_abort_before_call(server: ScriptedOpenAIServer) -> None:
    from helix_dbos.tool import AbortSignal

    signal = AbortSignal()
    signal.abort("user pressed stop")
    inp = gen_input(config(server))
    inp.abort_signal = signal
    error = error_of(await LiteLLMAdapter().generate_step(inp))
    assert error.code == "framework_cancelled"
    assert server.request_count == 0


async def test_concurrent_calls(server: ScriptedOpenAIServer) -> None:
    server.add(*[{"text": f"answer {i}", "chunk_delay_seconds": 0.01} for i in range(8)])
    adapter = LiteLLMAdapter()
    results = await asyncio.gather(*(adapter.generate_step(gen_input(config(server))) for _ in range(8)))
    contents = sorted(r.content for r in results if isinstance(r, TextStepResult))
    assert contents == sorted(f"answer {i}" for i in range(8))
    assert server.request_count == 8


def test_adapter_satisfies_protocol() -> None:
    assert isinstance(LiteLLMAdapter(), LLMAdapter)


# -- pure helpers --------------------------------------------------------------------------------


def test_to_strict_json_schema() -> None:
    original = Report.model_json_schema()
    snapshot = json.dumps(original, sort_keys=True)
    strict = to_strict_json_schema(original)
    assert json.dumps(original, sort_keys=True) == snapshot  # input untouched
    assert strict["additionalProperties"] is False
    assert strict["required"] == ["title", "address", "tags"]
    assert strict["properties"]["tags"]["type"] == ["array", "null"]
    assert "default" not in json.dumps(strict)
    assert strict["$defs"]["Address"]["additionalProperties"] is False
    # $ref with siblings is inlined (strict mode forbids siblings next to $ref)
    with_description = to_strict_json_schema(
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A", "description": "the a"}},
            "required": ["a"],
            "$defs": {"A": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        }
    )
    a = with_description["properties"]["a"]
    assert "$ref" not in a and a["description"] == "the a"
    assert a["additionalProperties"] is False and a["required"] == ["x"]
    assert a["properties"]["x"]["type"] == ["integer", "null"]
    # enums gain null; explicit free-form additionalProperties is left for the provider to judge
    other = to_strict_json_schema(
        {
            "type": "object",
            "properties": {
                "e": {"type": "string", "enum": ["a", "b"]},
                "m": {"type": "object", "additionalProperties": True},
            },
        }
    )
    assert other["properties"]["e"]["enum"] == ["a", "b", None]
    assert other["properties"]["m"]["additionalProperties"] is True


def test_classify_plain_exceptions() -> None:
    assert classify_provider_error(TimeoutError("slow")).code == "provider_timeout"
    refused = classify_provider_error(ConnectionRefusedError("refused"), provider="openai")
    assert refused.code == "provider_error" and refused.retryable
    bug = classify_provider_error(ValueError("bug"))
    assert bug.code == "framework_internal_error" and not bug.retryable
    helix = HelixError("x", code="provider_refused")
    assert classify_provider_error(helix) is helix
    missing = classify_provider_error(
        Exception("Missing Anthropic API Key - set ANTHROPIC_API_KEY"), provider="anthropic"
    )
    assert missing.code == "provider_auth_error" and "ANTHROPIC_API_KEY" in missing.message


def test_retry_delay() -> None:
    plain = HelixError("x", code="provider_error")
    assert retry_delay_seconds(0, plain, rng=lambda: 0.0) == 0.25
    assert retry_delay_seconds(0, plain, rng=lambda: 1.0) == 0.5
    assert retry_delay_seconds(3, plain, rng=lambda: 1.0) == 4.0
    assert retry_delay_seconds(10, plain, rng=lambda: 1.0) == 20.0
    told = HelixError("x", code="provider_rate_limited", retry_after_seconds=7)
    assert retry_delay_seconds(0, told) == 7
    assert retry_delay_seconds(0, HelixError("x", retry_after_seconds=600)) == 60


# -- the scripted server itself ------------------------------------------------------------------


def test_server_answers_500_when_script_is_exhausted_and_lists_models() -> None:
    with ScriptedOpenAIServer() as srv:
        with urllib.request.urlopen(f"{srv.base_url}/models") as response:
            assert json.load(response)["data"][0]["id"] == "fake"
        request = urllib.request.Request(
            f"{srv.base_url}/chat/completions", data=b'{"model": "fake", "messages": []}', method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request)
        assert info.value.code == 500
        assert "script exhausted" in json.load(info.value)["error"]["message"]
        info.value.close()
        assert srv.request_count == 1


async def test_server_handler_fallback() -> None:
    with ScriptedOpenAIServer(
        [{"text": "scripted"}], handler=lambda body: {"text": f"echo {body['messages'][-1]['content']}"}
    ) as srv:
        adapter = LiteLLMAdapter()
        first = await adapter.generate_step(gen_input(config(srv)))
        second = await adapter.generate_step(gen_input(config(srv)))
    assert isinstance(first, TextStepResult) and first.content == "scripted"
    assert isinstance(second, TextStepResult) and second.content == "echo Hi"


# -- no network at import --------------------------------------------------------------------------


def test_import_and_call_make_no_network_lookups() -> None:
    script = textwrap.dedent(
        """
        import socket
        hosts = []
        real = socket.getaddrinfo
        def spy(host, *args, **kwargs):
            hosts.append(host)
            return real(host, *args, **kwargs)
        socket.getaddrinfo = spy
        import asyncio, time
        from helix_dbos.llm.config import LLMConfig
        from helix_dbos.llm.base import LLMGenerateInput
        from helix_dbos.llm.litellm import LiteLLMAdapter
        from helix_dbos.messages import UserMessage
        from helix_dbos.testing.fake_openai import ScriptedOpenAIServer
        with ScriptedOpenAIServer([{"text": "hi"}]) as srv:
            config = LLMConfig(model="openai/fake", api_base=srv.base_url, api_key="t")
            inp = LLMGenerateInput([UserMessage(content="x")], [], config, "run", "agent")
            result = asyncio.run(LiteLLMAdapter().generate_step(inp))
            assert result.type == "text", result
        time.sleep(0.5)  # give any background fetch thread a chance to run
        bad = [h for h in hosts if h not in ("127.0.0.1", "localhost", "::1")]
        print("BAD" if bad else "OK", bad)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM_", "HF_HUB_"))}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK"), proc.stdout


# -- Anthropic request shaping (cache_control, thinking replay) ---------------------------------


class _AnthropicCapture(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append({"path": self.path, "body": body})
        reply = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "deep", "signature": "sig-2"},
                {"type": "text", "text": "ok"},
            ],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 5},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


async def test_anthropic_cache_control_and_thinking_reach_the_wire() -> None:
    _AnthropicCapture.bodies = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _AnthropicCapture)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        cfg = LLMConfig(
            model="anthropic/claude-sonnet-4-5",
            api_base=f"http://127.0.0.1:{httpd.server_address[1]}",
            api_key="test",
            max_output_tokens=256,
            cache=[anthropic_cache(ttl="5m")],
            max_retries=0,
        )
        history: list[Message] = [
            SystemMessage(content="sys"),
            UserMessage(content="weather?"),
            AssistantMessage(
                content=None,
                tool_calls=[ToolCallRequest(id="toolu_1", name="get_weather", arguments={"city": "Oslo"})],
                thinking=ThinkingContent(content="need weather", signature="sig-1"),
            ),
            ToolResultMessage(tool_call_id="toolu_1", tool_name="get_weather", content='"sunny"'),
        ]
        result = await LiteLLMAdapter(stream=False).generate_step(
            gen_input(cfg, messages=history, tools=[STRICT_WEATHER, SEARCH])
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert isinstance(result, TextStepResult), result
    assert result.content == "ok"
    assert result.thinking is not None and result.thinking.signature == "sig-2"
    assert result.usage is not None and result.usage.cached_input_tokens == 5
    [sent] = _AnthropicCapture.bodies
    assert sent["path"] == "/v1/messages"
    body = sent["body"]
    marker = {"type": "ephemeral", "ttl": "5m"}
    assert body["system"] == [{"type": "text", "text": "sys", "cache_control": marker}]
    assert body["tools"][-1]["cache_control"] == marker
    assert "cache_control" not in body["tools"][0]
    user, assistant, tool_turn = body["messages"]
    assert user["content"][0]["cache_control"] == marker
    assert assistant["content"][0] == {"type": "thinking", "thinking": "need weather", "signature": "sig-1"}
    assert assistant["content"][-1]["type"] == "tool_use"
    assert tool_turn["content"][0]["type"] == "tool_result"
    assert tool_turn["content"][0]["tool_use_id"] == "toolu_1"
    assert "cache_control" in json.dumps(tool_turn)


async def test_tool_json_nested_too_deeply_is_passed_on_for_the_runtime_to_answer(
    server: ScriptedOpenAIServer, sleeps: Sleeps
) -> None:
    """Streamed: LiteLLM 1.106.2's own non-stream path parses the arguments and fails on them (a 500)."""
    deep = "[" * 5000 + "]" * 5000  # valid JSON that Python's parser cannot hold
    result = await run(
        server, {"tool_calls": [("search", {})], "raw_arguments": deep}, stream=True, sleeps=sleeps, tools=[SEARCH]
    )
    assert isinstance(result, ToolCallsStepResult) and result.tool_calls[0].arguments == deep
    assert server.request_count == 1
