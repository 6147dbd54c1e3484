"""Prompt-cache strategies: pure functions that annotate a request so providers can reuse a prefix.

A strategy (seed 002 ``applyCacheStrategies``) takes a :class:`CacheRequest` and returns a
:class:`CacheResult` with annotated messages, per-tool provider options, request provider options
and HTTP headers. :func:`apply_cache_strategies` folds several of them left to right. Nothing here
does I/O, so strategies run inside the durable LLM step and replay identically.

Annotations use the same ``provider_options`` shape as messages and :class:`LLMConfig`
(``{"anthropic": {"cache_control": {...}}}``); the LiteLLM adapter turns them into the provider's
wire format (content-block ``cache_control`` for Anthropic-family models) and ignores options for
other providers, so one agent definition can carry several strategies safely.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from helix_dbos.llm.config import LLMConfig
from helix_dbos.messages import Message
from helix_dbos.tool import Tool

__all__ = [
    "AppliedCacheResult",
    "CacheRequest",
    "CacheResult",
    "CacheStrategy",
    "ProviderOptions",
    "anthropic_cache",
    "apply_cache_strategies",
    "merge_provider_options",
    "openai_cache",
    "xai_cache",
]

ProviderOptions = dict[str, dict[str, Any]]
"""Per-provider option objects, keyed by LiteLLM provider name (``"openai"``, ``"anthropic"``)."""


@dataclass(frozen=True)
class CacheRequest:
    """What a strategy sees: the request about to be sent."""

    messages: list[Message]
    tools: list[Tool]
    config: LLMConfig
    session_id: str | None = None
    """The session being run (the seeds' ``context.sessionId``); cache keys derive from it."""


@dataclass(frozen=True)
class CacheResult:
    """A strategy's annotations; ``None`` fields leave the request unchanged."""

    messages: list[Message] | None = None
    tools: list[Tool] | None = None
    tool_provider_options: Mapping[str, ProviderOptions] | None = None
    """Provider options per tool name (``Tool`` is frozen and has no ``provider_options`` field)."""
    provider_options: ProviderOptions | None = None
    """Request-level options, e.g. ``{"openai": {"prompt_cache_key": ...}}``."""
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True)
class AppliedCacheResult:
    """All strategies folded together; ``messages`` and ``tools`` are always present."""

    messages: list[Message]
    tools: list[Tool]
    tool_provider_options: dict[str, ProviderOptions] = field(default_factory=dict)
    provider_options: ProviderOptions = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


CacheStrategy = Callable[[CacheRequest], CacheResult]
"""A pure function that annotates a request for prompt caching."""


def merge_provider_options(
    base: Mapping[str, Mapping[str, Any]] | None, additions: Mapping[str, Mapping[str, Any]] | None
) -> ProviderOptions:
    """Shallow-merge per-provider option objects into a new dict; neither input is mutated.

    For each provider the option objects are merged key by key, ``additions`` winning.
    """
    merged: ProviderOptions = {provider: dict(options) for provider, options in (base or {}).items()}
    for provider, options in (additions or {}).items():
        merged[provider] = {**merged.get(provider, {}), **options}
    return merged


def apply_cache_strategies(
    strategies: CacheStrategy | Sequence[CacheStrategy] | None, request: CacheRequest
) -> AppliedCacheResult:
    """Run the strategies in order, each seeing the messages and tools the previous one produced."""
    if strategies is None:
        strategy_list: Sequence[CacheStrategy] = ()
    elif callable(strategies):
        strategy_list = (strategies,)
    else:
        strategy_list = strategies
    current = request
    tool_options: dict[str, ProviderOptions] = {}
    provider_options: ProviderOptions = {}
    headers: dict[str, str] = {}
    for strategy in strategy_list:
        result = strategy(current)
        current = replace(
            current,
            messages=result.messages if result.messages is not None else current.messages,
            tools=result.tools if result.tools is not None else current.tools,
        )
        for name, options in (result.tool_provider_options or {}).items():
            tool_options[name] = merge_provider_options(tool_options.get(name), options)
        provider_options = merge_provider_options(provider_options, result.provider_options)
        headers.update(result.headers or {})
    return AppliedCacheResult(
        messages=list(current.messages),
        tools=list(current.tools),
        tool_provider_options=tool_options,
        provider_options=provider_options,
        headers=headers,
    )


def _cache_control(ttl: str | None) -> dict[str, Any]:
    control: dict[str, Any] = {"type": "ephemeral"}
    if ttl is not None:
        control["ttl"] = ttl
    return control


def _with_options(message: Message, options: ProviderOptions) -> Message:
    return message.model_copy(update={"provider_options": merge_provider_options(message.provider_options, options)})


def anthropic_cache(ttl: str | None = "1h") -> CacheStrategy:
    """Anthropic prompt caching: up to four ``cache_control`` breakpoints (Anthropic's limit).

    Marks the last system message and the last tool definition (the stable prefix), plus the last
    two user/tool messages, so each turn reads the previous turn's cache entry and writes a new
    one (a rolling breakpoint). ``ttl`` is ``"5m"`` or ``"1h"``; ``None`` uses the provider default.
    """
    marker: ProviderOptions = {"anthropic": {"cache_control": _cache_control(ttl)}}

    def strategy(request: CacheRequest) -> CacheResult:
        messages = list(request.messages)
        system_indexes = [i for i, m in enumerate(messages) if m.role == "system"]
        turn_indexes = [i for i, m in enumerate(messages) if m.role in ("user", "tool")]
        for index in {*system_indexes[-1:], *turn_indexes[-2:]}:
            messages[index] = _with_options(messages[index], marker)
        tool_options = {request.tools[-1].name: marker} if request.tools else None
        return CacheResult(messages=messages, tool_provider_options=tool_options)

    return strategy


def openai_cache() -> CacheStrategy:
    """OpenAI prompt caching: route a session's requests to the same cache with ``prompt_cache_key``.

    OpenAI caches prefixes automatically; the key only improves hit rates, so without a session id
    this strategy does nothing.
    """

    def strategy(request: CacheRequest) -> CacheResult:
        if not request.session_id:
            return CacheResult()
        return CacheResult(provider_options={"openai": {"prompt_cache_key": request.session_id}})

    return strategy


def xai_cache() -> CacheStrategy:
    """XAI (Grok) prompt caching: the ``x-grok-conv-id`` header pins a conversation to one cache."""

    def strategy(request: CacheRequest) -> CacheResult:
        if not request.session_id:
            return CacheResult()
        return CacheResult(headers={"x-grok-conv-id": request.session_id})

    return strategy
