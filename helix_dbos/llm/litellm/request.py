"""Request building: helix messages and tools -> the keyword arguments of ``litellm.acompletion``.

Request dicts are built explicitly, field by field, from helix messages (never
``message.model_dump()``, which on LiteLLM 1.106.2 leaks ``provider_specific_fields`` into the next
request). Provider differences handled here: Anthropic-family models (Anthropic itself, and Claude
served by Bedrock, Vertex AI or OpenRouter) get ``cache_control`` content blocks and their signed
thinking blocks replayed; tools marked ``strict`` are sent in strict form only to the providers in
``strict_providers`` (see :mod:`helix_dbos.llm.litellm`), and so is a native-mode
``response_format``. The engine owns retries, so every request
carries ``num_retries=0`` and the config's timeout.

Pure but for :func:`build_request`'s provider lookup, which goes through LiteLLM's offline tables.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from helix_dbos.errors import HelixError
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.llm.caching import (
    AppliedCacheResult,
    CacheRequest,
    CacheStrategy,
    ProviderOptions,
    apply_cache_strategies,
    merge_provider_options,
)
from helix_dbos.llm.files import message_files, user_content_parts
from helix_dbos.llm.litellm.schema import to_strict_json_schema
from helix_dbos.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)
from helix_dbos.tool import Tool

__all__ = ["DEFAULT_STRICT_TOOL_PROVIDERS", "LiteLLMRequest", "build_request", "message_to_dict"]

DEFAULT_STRICT_TOOL_PROVIDERS: frozenset[str] = frozenset({"openai", "azure", "azure_ai"})
"""LiteLLM providers that forward ``strict`` tool schemas to an API that enforces them."""

_RESERVED_KWARGS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "stream",
        "stream_options",
        # retries and fallbacks are the engine's (LLMConfig.retry / fallbacks): LiteLLM's or the
        # openai SDK's own would multiply with them, invisibly, and call models the step never records
        "num_retries",
        "max_retries",
        "fallbacks",
        "context_window_fallbacks",
        "content_policy_fallbacks",
    }
)
"""Request keys the adapter owns; provider options may not override them."""

_ANTHROPIC_HOSTS = frozenset({"bedrock", "bedrock_converse", "vertex_ai", "openrouter"})
"""Providers that serve Claude models and take Anthropic's cache_control / thinking blocks."""


def _resolve_provider(litellm: Any, model: str, api_base: str | None) -> str:
    try:
        return str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
    except Exception:
        # LiteLLM will reject the model itself when the call is made; this only picks options.
        return model.split("/", 1)[0] if "/" in model else ""


def _is_anthropic_family(provider: str, model: str) -> bool:
    return provider == "anthropic" or (provider in _ANTHROPIC_HOSTS and "claude" in model.lower())


def _cache_control(options: Mapping[str, Mapping[str, Any]] | None, anthropic: bool) -> Any:
    if not anthropic or not options:
        return None
    return options.get("anthropic", {}).get("cache_control")


def _content(text: str, cache_control: Any) -> str | list[dict[str, Any]]:
    if cache_control is None or not text:
        return text
    return [{"type": "text", "text": text, "cache_control": cache_control}]


def _thinking_blocks(thinking: ThinkingContent) -> list[dict[str, Any]] | None:
    if thinking.blocks:
        return [dict(block) for block in thinking.blocks]
    if thinking.signature:
        return [{"type": "thinking", "thinking": thinking.content, "signature": thinking.signature}]
    return None


def _user_parts(message: UserMessage, cache_control: Any) -> list[dict[str, Any]] | None:
    """Content parts of a user message with files (``None`` without): text, then one part per file."""
    files = message_files(message)
    if not files:
        return None
    parts = user_content_parts(message.content, files)
    if cache_control is not None:  # the breakpoint goes after the whole message
        parts[-1] = {**parts[-1], "cache_control": cache_control}
    return parts


def _assistant_to_dict(message: AssistantMessage, cache_control: Any, *, anthropic: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "role": "assistant",
        "content": _content(message.content or "", cache_control),
    }
    if message.tool_calls:
        if not message.content:
            result["content"] = None
        result["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in message.tool_calls
        ]
    # Thinking is replayed only to Claude models, which need signed blocks to continue a tool
    # loop; OpenAI-compatible servers may reject the field (DeepSeek answers 400).
    if anthropic and message.thinking is not None:
        blocks = _thinking_blocks(message.thinking)
        if blocks:
            result["thinking_blocks"] = blocks
            result["reasoning_content"] = message.thinking.content
    return result


def message_to_dict(message: Message, *, anthropic: bool) -> dict[str, Any]:
    """One helix message as a LiteLLM (OpenAI-shaped) message dict; ``anthropic`` enables cache blocks."""
    cache_control = _cache_control(message.provider_options, anthropic)
    if isinstance(message, UserMessage) and (parts := _user_parts(message, cache_control)) is not None:
        return {"role": "user", "content": parts}
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": _content(message.content, cache_control)}
    if isinstance(message, ToolResultMessage):
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": _content(message.content, cache_control),
        }
    if isinstance(message, AssistantMessage):
        return _assistant_to_dict(message, cache_control, anthropic=anthropic)
    raise TypeError(f"not a helix message: {message!r}")


def _tool_to_dict(tool: Tool, *, strict: bool, options: ProviderOptions | None, anthropic: bool) -> dict[str, Any]:
    schema = copy.deepcopy(tool.json_schema())
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    if strict:
        function["parameters"] = to_strict_json_schema(schema)
        function["strict"] = True
    else:
        function["parameters"] = schema
    result: dict[str, Any] = {"type": "function", "function": function}
    cache_control = _cache_control(options, anthropic)
    if cache_control is not None:
        result["cache_control"] = cache_control
    return result


@dataclass(frozen=True)
class LiteLLMRequest:
    """One step's request, built once and sent unchanged by every attempt."""

    kwargs: dict[str, Any]
    """The keyword arguments of ``litellm.acompletion``."""
    provider: str
    """LiteLLM's provider name for the model (``"openai"``, ``"anthropic"``); names errors."""
    strict_schemas: dict[str, dict[str, Any]]
    """Original argument schemas of the tools sent in strict form, by tool name."""
    structured_output: bool = False
    """The request carries a ``response_format`` (native output mode): the answer's text is the output."""
    strict_output_schema: dict[str, Any] | None = None
    """The original output schema when it was sent in strict form (its forced nulls are dropped)."""


def _response_format(response_format: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    """``response_format`` as sent: strict (closed objects, ``"strict": true``) where the provider enforces it."""
    result = copy.deepcopy(response_format)
    spec = result.get("json_schema")
    if strict and isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
        spec["schema"] = to_strict_json_schema(spec["schema"])
        spec["strict"] = True
    return result


def _provider_options(config_options: ProviderOptions, cached: AppliedCacheResult, provider: str) -> dict[str, Any]:
    options = merge_provider_options(config_options, cached.provider_options).get(provider, {})
    clashes = sorted(_RESERVED_KWARGS & options.keys())
    if clashes:
        raise HelixError(
            f"provider_options[{provider!r}] may not set {clashes}: the adapter owns these request fields",
            code="validation_error",
            retryable=False,
        )
    return options


def build_request(
    litellm: Any,
    input: LLMGenerateInput,
    *,
    stream: bool,
    strict_providers: Collection[str],
) -> LiteLLMRequest:
    """Build the request for ``input``: cache strategies applied, messages and tools converted.

    Raises a ``validation_error`` :class:`HelixError` when provider options try to set a field the
    adapter owns (``model``, ``messages``, ``num_retries``...).
    """
    config = input.config
    provider = _resolve_provider(litellm, config.model, config.api_base)
    anthropic = _is_anthropic_family(provider, config.model)
    strategies = cast("CacheStrategy | Sequence[CacheStrategy] | None", config.cache)
    cached: AppliedCacheResult = apply_cache_strategies(
        strategies, CacheRequest(list(input.messages), list(input.tools), config, input.session_id)
    )
    strict_ok = provider in strict_providers
    strict_schemas = {t.name: t.json_schema() for t in cached.tools if t.strict and strict_ok}
    kwargs: dict[str, Any] = {
        "model": config.model,
        "messages": [message_to_dict(m, anthropic=anthropic) for m in cached.messages],
        "timeout": config.timeout_seconds,
    }
    if cached.tools:
        kwargs["tools"] = [
            _tool_to_dict(
                t,
                strict=t.name in strict_schemas,
                options=cached.tool_provider_options.get(t.name),
                anthropic=anthropic,
            )
            for t in cached.tools
        ]
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    if config.max_output_tokens is not None:
        kwargs["max_tokens"] = config.max_output_tokens
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if config.api_key is not None:
        kwargs["api_key"] = config.api_key.get_secret_value()
    options = _provider_options(config.provider_options, cached, provider)
    kwargs.update(options)
    headers = {**(options.get("extra_headers") or {}), **cached.headers}
    if headers:
        kwargs["extra_headers"] = headers
    strict_output_schema: dict[str, Any] | None = None
    if input.response_format is not None:  # native output mode: the agent's format wins over options
        kwargs["response_format"] = _response_format(input.response_format, strict=strict_ok)
        schema = input.response_format.get("json_schema", {}).get("schema")
        strict_output_schema = copy.deepcopy(schema) if strict_ok and isinstance(schema, dict) else None
    kwargs["num_retries"] = 0  # the engine owns retries; LiteLLM's would multiply them invisibly
    kwargs["stream"] = stream
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    return LiteLLMRequest(
        kwargs=kwargs,
        provider=provider,
        strict_schemas=strict_schemas,
        structured_output=input.response_format is not None,
        strict_output_schema=strict_output_schema,
    )
