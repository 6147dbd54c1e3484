from typing import Any

from pydantic import BaseModel

from helix_dbos.llm.caching import (
    CacheRequest,
    CacheResult,
    anthropic_cache,
    apply_cache_strategies,
    merge_provider_options,
    openai_cache,
    xai_cache,
)
from helix_dbos.llm.config import LLMConfig
from helix_dbos.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from helix_dbos.tool import Tool, define_tool


class _In(BaseModel):
    q: str


def _tool(name: str) -> Tool:
    return define_tool(name, description=name, input_schema=_In, execute=lambda i, c: None)


def _request(messages: list[Message], tools: list[Tool] | None = None, session_id: str | None = "s1") -> CacheRequest:
    return CacheRequest(messages=messages, tools=tools or [], config=LLMConfig(model="openai/x"), session_id=session_id)


CONVERSATION: list[Message] = [
    SystemMessage(content="sys"),
    UserMessage(content="u1"),
    AssistantMessage(content="a1"),
    UserMessage(content="u2"),
    AssistantMessage(content=None, tool_calls=[ToolCallRequest(id="c1", name="t")]),
    ToolResultMessage(tool_call_id="c1", tool_name="t", content="{}"),
]


def _cc(message: Message) -> Any:
    return (message.provider_options or {}).get("anthropic", {}).get("cache_control")


def test_merge_provider_options_is_shallow_per_provider_and_pure() -> None:
    a = {"openai": {"x": 1, "y": 1}, "anthropic": {"k": 1}}
    b = {"openai": {"y": 2}, "xai": {"z": 3}}
    merged = merge_provider_options(a, b)
    assert merged == {"openai": {"x": 1, "y": 2}, "anthropic": {"k": 1}, "xai": {"z": 3}}
    assert a == {"openai": {"x": 1, "y": 1}, "anthropic": {"k": 1}}
    assert b == {"openai": {"y": 2}, "xai": {"z": 3}}
    merged["openai"]["x"] = 99
    assert a["openai"]["x"] == 1
    assert merge_provider_options(None, None) == {}


def test_no_strategies_passes_request_through() -> None:
    request = _request(list(CONVERSATION), [_tool("a")])
    result = apply_cache_strategies(None, request)
    assert result.messages == request.messages
    assert result.tools == request.tools
    assert result.provider_options == {}
    assert result.headers == {}
    assert result.tool_provider_options == {}
    assert apply_cache_strategies([], request).messages == request.messages


def test_anthropic_cache_marks_system_last_tool_and_last_two_turns() -> None:
    tools = [_tool("a"), _tool("b")]
    result = apply_cache_strategies(anthropic_cache(), _request(list(CONVERSATION), tools))
    marked = [i for i, m in enumerate(result.messages) if _cc(m) is not None]
    # system (0), and the last two user/tool messages: u2 (3) and the tool result (5)
    assert marked == [0, 3, 5]
    assert _cc(result.messages[0]) == {"type": "ephemeral", "ttl": "1h"}
    assert result.tool_provider_options == {"b": {"anthropic": {"cache_control": {"type": "ephemeral", "ttl": "1h"}}}}
    # the input is not modified
    assert all(m.provider_options is None for m in CONVERSATION)


def test_anthropic_cache_ttl_and_existing_options_are_kept() -> None:
    messages: list[Message] = [
        SystemMessage(content="sys", provider_options={"anthropic": {"other": 1}, "openai": {"o": 2}}),
        UserMessage(content="u"),
    ]
    result = apply_cache_strategies(anthropic_cache(ttl="5m"), _request(messages))
    assert result.messages[0].provider_options == {
        "anthropic": {"other": 1, "cache_control": {"type": "ephemeral", "ttl": "5m"}},
        "openai": {"o": 2},
    }
    no_ttl = apply_cache_strategies(anthropic_cache(ttl=None), _request(messages))
    assert _cc(no_ttl.messages[1]) == {"type": "ephemeral"}


def test_anthropic_cache_without_system_or_tools() -> None:
    result = apply_cache_strategies(anthropic_cache(), _request([UserMessage(content="only")]))
    assert _cc(result.messages[0]) is not None
    assert result.tool_provider_options == {}


def test_openai_cache_sets_prompt_cache_key_from_session() -> None:
    result = apply_cache_strategies([openai_cache()], _request([UserMessage(content="u")], session_id="sess-9"))
    assert result.provider_options == {"openai": {"prompt_cache_key": "sess-9"}}
    assert apply_cache_strategies(openai_cache(), _request([], session_id=None)).provider_options == {}


def test_xai_cache_sets_conversation_header() -> None:
    result = apply_cache_strategies(xai_cache(), _request([], session_id="sess-1"))
    assert result.headers == {"x-grok-conv-id": "sess-1"}
    assert apply_cache_strategies(xai_cache(), _request([], session_id=None)).headers == {}


def test_strategies_fold_left_to_right() -> None:
    seen: list[int] = []

    def first(request: CacheRequest) -> CacheResult:
        return CacheResult(
            messages=[*request.messages, UserMessage(content="added")],
            provider_options={"openai": {"a": 1, "b": 1}},
            headers={"h": "1"},
        )

    def second(request: CacheRequest) -> CacheResult:
        seen.append(len(request.messages))
        return CacheResult(provider_options={"openai": {"b": 2}}, headers={"h": "2", "g": "x"})

    result = apply_cache_strategies([first, second, openai_cache()], _request([UserMessage(content="u")]))
    assert seen == [2]
    assert [m.content for m in result.messages] == ["u", "added"]
    assert result.provider_options == {"openai": {"a": 1, "b": 2, "prompt_cache_key": "s1"}}
    assert result.headers == {"h": "2", "g": "x"}


def test_anthropic_then_openai_compose() -> None:
    result = apply_cache_strategies(
        [anthropic_cache(), openai_cache(), xai_cache()], _request(list(CONVERSATION), [_tool("a")])
    )
    assert _cc(result.messages[0]) is not None
    assert result.provider_options["openai"]["prompt_cache_key"] == "s1"
    assert result.headers["x-grok-conv-id"] == "s1"
    assert "a" in result.tool_provider_options
