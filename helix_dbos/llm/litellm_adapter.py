"""``LiteLLMAdapter``: the production :class:`LLMAdapter`, one ``litellm.acompletion`` call per step.

What it guarantees, and why:

* **The engine owns retries.** Every call passes ``num_retries=0`` (the openai SDK under LiteLLM
  would otherwise retry twice, invisibly) and ``timeout=config.timeout_seconds`` (LiteLLM's default
  is 6000 s). Retryable failures are retried here, ``config.max_retries`` times, with exponential
  backoff and jitter (base 0.5 s, cap 20 s) or the server's ``Retry-After``; after that the failure
  is returned as ``ErrorStepResult`` so the durable step records it as data.
* **Request dicts are built explicitly** from helix messages (never ``message.model_dump()``,
  which on LiteLLM 1.106.2 leaks ``provider_specific_fields`` into the next request).
* **Truncated streams are failures.** LiteLLM 1.106.2 ends a stream whose connection dropped as if
  it had finished (synthesised ``finish_reason="stop"``, half a tool-call JSON). A stream that
  ended without a provider finish reason, or a tool call whose arguments are not valid JSON, is a
  retryable ``provider_error``. (Exception: with ``finish_reason="length"`` the arguments were cut
  by ``max_output_tokens``; retrying would cut them again, so the raw string is kept and the step
  reports ``stop_reason="max_tokens"`` for the orchestration layer to recover from.)
* **The loop is driven by tool calls, not finish reasons**: LiteLLM 1.106.2 streaming keeps
  ``stop`` even when tool calls were returned.

Strict tools (seed 003 "Strict (constrained) structured output"): a tool with ``strict=True`` (the
``__finish__`` tool gets it from ``LLMConfig.strict_output``) is sent with ``"strict": true`` and a
strict-form schema (see :func:`to_strict_json_schema`) only when the provider is in
``strict_tool_providers`` (default :data:`DEFAULT_STRICT_TOOL_PROVIDERS`: ``openai``, ``azure``,
``azure_ai``). The rule is by provider, not by LiteLLM's model table, because ``openai/<anything>``
against an ``api_base`` is an unregistered model that LiteLLM knows nothing about but forwards
``strict`` byte-for-byte. Elsewhere the tool is sent as usual, a safe no-op as the seed requires
(LiteLLM 1.106.2 drops ``strict`` for ``anthropic/`` and ``hosted_vllm/`` anyway). Strict form makes
optional fields nullable, so ``null`` arguments for fields whose original schema does not allow
null are removed from the parsed arguments, letting the tool's defaults apply.

Importing this module sets LiteLLM's offline switches (``LITELLM_LOCAL_MODEL_COST_MAP`` and
friends) with ``os.environ.setdefault``; LiteLLM itself is imported on first use (it takes seconds).
If something imports LiteLLM before this module, set those variables in the environment instead.
"""

from __future__ import annotations

import asyncio
import copy
import email.utils
import json
import logging
import os
import random
import re
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from helix_dbos.errors import HelixError, classify_error
from helix_dbos.llm.base import LLMGenerateInput, LLMStreamCallbacks
from helix_dbos.llm.caching import (
    AppliedCacheResult,
    CacheRequest,
    CacheStrategy,
    ProviderOptions,
    apply_cache_strategies,
    merge_provider_options,
)
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.files import FileKind, message_files, user_content_parts
from helix_dbos.llm.stop_reason import map_litellm_finish_reason
from helix_dbos.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)
from helix_dbos.step_result import (
    ErrorStepResult,
    ParsedSubAgentCall,
    ParsedToolCall,
    StepResult,
    StopReason,
    TextStepResult,
    TokenUsage,
    ToolCallsStepResult,
)
from helix_dbos.tool import SUBAGENT_TOOL_PREFIX, Tool

__all__ = [
    "DEFAULT_STRICT_TOOL_PROVIDERS",
    "LiteLLMAdapter",
    "classify_provider_error",
    "retry_delay_seconds",
    "to_strict_json_schema",
]

for _name, _value in (
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    ("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True"),
    ("HF_HUB_OFFLINE", "1"),
):
    os.environ.setdefault(_name, _value)

DEFAULT_STRICT_TOOL_PROVIDERS: frozenset[str] = frozenset({"openai", "azure", "azure_ai"})
"""LiteLLM providers that forward ``strict`` tool schemas to an API that enforces them."""

_BACKOFF_BASE_SECONDS = 0.5
_BACKOFF_CAP_SECONDS = 20.0
_RETRY_AFTER_CAP_SECONDS = 60.0
"""A ``Retry-After`` beyond this is clamped: a step should not sleep for minutes."""

_RESERVED_KWARGS = frozenset({"model", "messages", "tools", "stream", "stream_options", "num_retries"})
"""Request keys the adapter owns; provider options may not override them."""

_ANTHROPIC_HOSTS = frozenset({"bedrock", "bedrock_converse", "vertex_ai", "openrouter"})
"""Providers that serve Claude models and take Anthropic's cache_control / thinking blocks."""


def _import_litellm() -> Any:
    import litellm

    litellm.suppress_debug_info = True  # otherwise every error prints "Give Feedback / Get Help"
    return litellm


# -- strict schemas ------------------------------------------------------------------------------


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_allows_null(variant) for variant in schema.get("anyOf", ()) if isinstance(variant, dict)) or (
        None in schema.get("enum", [0])
    )


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if _allows_null(schema):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and "$ref" not in schema:
        result = {**schema, "type": [kind, "null"]}
        if "enum" in result:
            result["enum"] = [*result["enum"], None]
        return result
    if isinstance(kind, list):
        return {**schema, "type": [*kind, "null"]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _resolve_ref(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"unsupported $ref {ref!r}: only local '#/...' references can be made strict")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    if not isinstance(node, dict):
        raise ValueError(f"$ref {ref!r} does not resolve to a schema object")
    return node


def _strictify(schema: Any, root: dict[str, Any]) -> Any:
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    node.pop("default", None)  # OpenAI strict mode rejects "default"
    if "$ref" in node and len(node) > 1:
        # Strict mode forbids keywords beside $ref ({"$ref": ..., "description": ...}): inline it.
        resolved = _resolve_ref(root, node.pop("$ref"))
        node = {**resolved, **node}
    for key in ("$defs", "definitions"):
        if isinstance(node.get(key), dict):
            node[key] = {name: _strictify(sub, root) for name, sub in node[key].items()}
    properties = node.get("properties")
    if isinstance(properties, dict):
        required = set(node.get("required", ()))
        node["properties"] = {
            name: _strictify(sub if name in required else _nullable(sub), root) for name, sub in properties.items()
        }
        node["required"] = list(properties)
    if node.get("type") == "object" or isinstance(properties, dict):
        # An explicit additionalProperties (a free-form dict) is kept: strict providers reject it,
        # and the seed's advice is to fix such a schema rather than silently change its meaning.
        node.setdefault("additionalProperties", False)
    if isinstance(node.get("items"), dict):
        node["items"] = _strictify(node["items"], root)
    for key in ("anyOf", "allOf", "oneOf"):
        if isinstance(node.get(key), list):
            node[key] = [_strictify(variant, root) for variant in node[key]]
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
        node = {**node.pop("allOf")[0], **node}
    return node


def to_strict_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return the strict-mode form of a JSON schema (OpenAI structured outputs / strict tools).

    Every object gets ``additionalProperties: false`` (unless it states its own) and lists all its
    properties as required; properties that were optional become nullable; ``default`` keywords
    are removed and ``$ref`` with sibling keywords is inlined. ``$defs`` are kept. The input is not
    modified.
    """
    root = copy.deepcopy(dict(schema))
    return cast(dict[str, Any], _strictify(root, root))


def _drop_optional_nulls(value: Any, schema: Any, root: dict[str, Any]) -> Any:
    """Undo strict-mode nullability: drop ``null`` for fields whose original schema forbids it."""
    if not isinstance(schema, dict):
        return value
    if "$ref" in schema:
        try:
            schema = {
                **_resolve_ref(root, schema["$ref"]),
                **{k: v for k, v in schema.items() if k != "$ref"},
            }
        except (KeyError, ValueError):
            return value
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties, required = schema["properties"], set(schema.get("required", ()))
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if item is None and sub is not None and key not in required and not _allows_null(sub):
                continue
            cleaned[key] = _drop_optional_nulls(item, sub, root) if sub is not None else item
        return cleaned
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_drop_optional_nulls(item, schema["items"], root) for item in value]
    variants = [v for v in schema.get("anyOf", ()) if isinstance(v, dict) and v.get("type") != "null"]
    if value is not None and len(variants) == 1:
        return _drop_optional_nulls(value, variants[0], root)
    return value


# -- request building ----------------------------------------------------------------------------


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


def _message_to_dict(message: Message, *, anthropic: bool) -> dict[str, Any]:
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
class _Request:
    kwargs: dict[str, Any]
    provider: str
    strict_schemas: dict[str, dict[str, Any]]
    """Original argument schemas of the tools sent in strict form, by tool name."""


def _build_request(
    litellm: Any,
    input: LLMGenerateInput,
    *,
    stream: bool,
    strict_providers: Collection[str],
) -> _Request:
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
        "messages": [_message_to_dict(m, anthropic=anthropic) for m in cached.messages],
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
    options = merge_provider_options(config.provider_options, cached.provider_options).get(provider, {})
    clashes = sorted(_RESERVED_KWARGS & options.keys())
    if clashes:
        raise HelixError(
            f"provider_options[{provider!r}] may not set {clashes}: the adapter owns these request fields",
            code="validation_error",
            retryable=False,
        )
    kwargs.update(options)
    headers = {**(options.get("extra_headers") or {}), **cached.headers}
    if headers:
        kwargs["extra_headers"] = headers
    kwargs["num_retries"] = 0  # the engine owns retries; LiteLLM's would multiply them invisibly
    kwargs["stream"] = stream
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    return _Request(kwargs=kwargs, provider=provider, strict_schemas=strict_schemas)


# -- error classification ------------------------------------------------------------------------

_MISSING_CREDENTIALS = re.compile(
    r"missing credentials|missing [\w .-]{0,40}api[ _-]?key|api_key client option must be set"
    r"|no api[ _-]?key|api[ _-]?key (?:is )?(?:not set|missing|required)",
    re.IGNORECASE,
)
_ENV_VAR = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_KEY|AUTH_TOKEN|ACCESS_KEY_ID)\b")
_CONTENT_FILTER = re.compile(r"content[_ ]policy|safety system|content management policy", re.IGNORECASE)
_OVERLOADED = re.compile(r"overloaded", re.IGNORECASE)


def _module_class(module: str, name: str) -> type[BaseException] | None:
    """Look a class up in an already imported module; classification must not import LiteLLM itself."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _is(exc: BaseException, *names: tuple[str, str]) -> bool:
    return any((cls := _module_class(m, n)) is not None and isinstance(exc, cls) for m, n in names)


def _status_code(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response_status = getattr(getattr(exc, "response", None), "status_code", None)
    return response_status if isinstance(response_status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` (delta or HTTP date) response headers."""
    for source in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        if not source:
            continue
        headers = {str(k).lower(): str(v) for k, v in dict(source).items()}
        try:
            if "retry-after-ms" in headers:
                return float(headers["retry-after-ms"]) / 1000.0
            if "retry-after" in headers:
                value = headers["retry-after"]
                try:
                    return float(value)
                except ValueError:
                    return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError, OverflowError):
            continue
    return None


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError) or _is(exc, ("openai", "APITimeoutError"), ("httpx", "TimeoutException")):
        return True
    original = getattr(exc, "original_exception", None)  # LiteLLM's MidStreamFallbackError wraps the cause
    return isinstance(original, BaseException) and original is not exc and _is_timeout(original)


def _is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, ConnectionError | socket.gaierror) or _is(
        exc, ("openai", "APIConnectionError"), ("httpx", "TransportError")
    )


def _env_hint(message: str, provider: str | None) -> str:
    names = sorted(set(_ENV_VAR.findall(message)))
    if not names and provider:
        names = [f"{provider.upper()}_API_KEY"]
    return " or ".join(names) if names else "the provider's API-key environment variable"


def classify_provider_error(exc: BaseException, *, provider: str | None = None) -> HelixError:
    """Map a LiteLLM / openai / httpx exception to a :class:`HelixError` with a ``provider_*`` code.

    Classification is by HTTP status first (LiteLLM's class names are unreliable: a 401 from an
    OpenAI-compatible server arrives as ``BadRequestError`` with ``status_code=401``), then by the
    LiteLLM classes that encode meaning (``ContentPolicyViolationError``,
    ``ContextWindowExceededError``), then by message for missing credentials, which LiteLLM
    reports as a 500 for ``openai/`` and a connection error for ``gemini/``.
    """
    if isinstance(exc, HelixError):
        return exc
    message = str(exc) or type(exc).__name__
    status = _status_code(exc)
    who = provider or "the provider"

    def error(text: str, code: Any, retryable: bool, retry_after: float | None = None) -> HelixError:
        return HelixError(
            text,
            code=code,
            retryable=retryable,
            status_code=status,
            cause=exc,
            retry_after_seconds=retry_after,
        )

    if _MISSING_CREDENTIALS.search(message):
        return error(
            f"Credentials for {who} are missing: set {_env_hint(message, provider)} or pass "
            f"LLMConfig.api_key ({message})",
            "provider_auth_error",
            False,
        )
    if _is(exc, ("litellm", "ContentPolicyViolationError")) or (
        status in (None, 400) and _CONTENT_FILTER.search(message)
    ):
        return error(
            f"{who} refused the request under its content policy: {message}",
            "provider_content_filtered",
            False,
        )
    if _is(exc, ("litellm", "ContextWindowExceededError")):
        return error(f"The request exceeds the model's context window: {message}", "provider_invalid_request", False)
    if status == 408 or _is_timeout(exc):
        return error(f"{who} timed out: {message}", "provider_timeout", True)
    if status in (401, 403):
        return error(
            f"{who} rejected the credentials ({status}); check LLMConfig.api_key or "
            f"{_env_hint(message, provider)}: {message}",
            "provider_auth_error",
            False,
        )
    if status == 429:
        return error(f"{who} rate-limited the request: {message}", "provider_rate_limited", True, _retry_after(exc))
    if status in (503, 529) or (_OVERLOADED.search(message) and (status is None or status >= 500)):
        return error(f"{who} is overloaded: {message}", "provider_overloaded", True, _retry_after(exc))
    if status is not None and status >= 500:
        return error(f"{who} failed ({status}): {message}", "provider_error", True, _retry_after(exc))
    if status is not None and status >= 400:
        return error(f"{who} rejected the request ({status}): {message}", "provider_invalid_request", False)
    if _is_connection_error(exc):
        return error(f"Could not reach {who}: {message}", "provider_error", True)
    return classify_error(exc)


def retry_delay_seconds(attempt: int, error: HelixError, *, rng: Callable[[], float] = random.random) -> float:
    """How long to wait before retry number ``attempt + 1`` (``attempt`` counts from 0).

    The server's ``Retry-After`` wins when present (clamped to 60 s); otherwise exponential backoff
    from 0.5 s capped at 20 s, with "equal jitter" (half fixed, half random) so that many runs
    throttled at once do not retry in lockstep.
    """
    if error.retry_after_seconds is not None:
        return min(max(0.0, error.retry_after_seconds), _RETRY_AFTER_CAP_SECONDS)
    backoff = min(_BACKOFF_CAP_SECONDS, _BACKOFF_BASE_SECONDS * (2.0**attempt))
    return backoff / 2 + rng() * backoff / 2


# -- response assembly ---------------------------------------------------------------------------


class _CallbackFailed(Exception):
    """Carries an exception raised by a stream callback past the provider-error handling."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def _notify(awaitable: Awaitable[None]) -> None:
    try:
        await awaitable
    except Exception as exc:
        raise _CallbackFailed(exc) from exc


class _Aborted(Exception):
    pass


@dataclass
class _RawCall:
    id: str | None = None
    name: str = ""
    arguments: str = ""


@dataclass
class _RawResponse:
    text: str = ""
    reasoning: str = ""
    thinking_blocks: list[dict[str, Any]] = field(default_factory=list)
    calls: list[_RawCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Any = None


def _not_json(name: str) -> Any:
    # Python's parser accepts Infinity / NaN; JSON (and every JSON store) does not.
    raise json.JSONDecodeError(f"{name} is not valid JSON", name, 0)


def _parse_arguments(call: _RawCall, *, truncated_ok: bool) -> Any:
    if not call.arguments.strip():
        return {}
    try:
        return json.loads(call.arguments, parse_constant=_not_json)
    except RecursionError:
        return call.arguments  # valid but too deep for Python's parser: the runtime answers it with an error
    except json.JSONDecodeError as exc:
        if truncated_ok:
            return call.arguments  # cut by max_tokens; plan_step_processing coerces it
        raise HelixError(
            f"truncated tool-call arguments for {call.name!r} (invalid JSON: {exc.msg}); the stream "
            "was probably cut off",
            code="provider_error",
            retryable=True,
        ) from exc


def _token_usage(usage: Any) -> TokenUsage | None:
    if usage is None:
        return None

    def count(obj: Any, name: str) -> int:
        value = getattr(obj, name, None) if obj is not None else None
        return value if isinstance(value, int) else 0

    return TokenUsage(
        input_tokens=count(usage, "prompt_tokens"),
        output_tokens=count(usage, "completion_tokens"),
        cached_input_tokens=count(getattr(usage, "prompt_tokens_details", None), "cached_tokens"),
        reasoning_tokens=count(getattr(usage, "completion_tokens_details", None), "reasoning_tokens"),
    )


def _merge_thinking_block(blocks: list[dict[str, Any]], delta: Mapping[str, Any]) -> None:
    """Fold a streamed thinking-block delta into the list (text appends, signature closes a block)."""
    last = blocks[-1] if blocks else None
    if last is not None and last.get("type") == delta.get("type") == "thinking" and not last.get("signature"):
        last["thinking"] = (last.get("thinking") or "") + (delta.get("thinking") or "")
        if delta.get("signature"):
            last["signature"] = delta["signature"]
    else:
        blocks.append(dict(delta))


def _thinking(raw: _RawResponse) -> ThinkingContent | None:
    if not raw.reasoning and not raw.thinking_blocks:
        return None
    signature = next((b["signature"] for b in reversed(raw.thinking_blocks) if b.get("signature")), None)
    content = raw.reasoning or "".join(str(b.get("thinking") or "") for b in raw.thinking_blocks)
    return ThinkingContent(content=content, signature=signature, blocks=raw.thinking_blocks or None)


def _parsed_calls(raw: _RawResponse, strict_schemas: Mapping[str, dict[str, Any]]) -> list[ParsedToolCall]:
    truncated_ok = map_litellm_finish_reason(raw.finish_reason) == "max_tokens"
    calls = []
    for call in raw.calls:
        arguments = _parse_arguments(call, truncated_ok=truncated_ok)
        schema = strict_schemas.get(call.name)
        if schema is not None:
            arguments = _drop_optional_nulls(arguments, schema, schema)
        calls.append(ParsedToolCall(id=call.id or f"call_{uuid.uuid4().hex[:24]}", name=call.name, arguments=arguments))
    return calls


def _step_result(raw: _RawResponse, calls: list[ParsedToolCall]) -> StepResult:
    stop_reason: StopReason = map_litellm_finish_reason(raw.finish_reason)
    usage, thinking = _token_usage(raw.usage), _thinking(raw)
    if not calls:
        return TextStepResult(
            content=raw.text,
            thinking=thinking,
            should_stop=stop_reason in ("end_turn", "stop_sequence"),
            stop_reason=stop_reason,
            usage=usage,
        )
    if stop_reason in ("end_turn", "stop_sequence", "unknown"):
        stop_reason = "tool_use"  # LiteLLM 1.106.2 streaming reports "stop" alongside tool calls
    tool_calls = [c for c in calls if not c.name.startswith(SUBAGENT_TOOL_PREFIX)]
    sub_agent_calls = [
        ParsedSubAgentCall(id=c.id, agent_type=c.name[len(SUBAGENT_TOOL_PREFIX) :], input=c.arguments)
        for c in calls
        if c.name.startswith(SUBAGENT_TOOL_PREFIX)
    ]
    return ToolCallsStepResult(
        content=raw.text or None,
        tool_calls=tool_calls,
        sub_agent_calls=sub_agent_calls,
        thinking=thinking,
        stop_reason=stop_reason,
        usage=usage,
    )


# -- the adapter ---------------------------------------------------------------------------------


class LiteLLMAdapter:
    """:class:`LLMAdapter` over ``litellm.acompletion``; see the module docstring for the contract.

    ``sleep`` is the backoff sleep (inject a fake in tests); ``strict_tool_providers`` overrides the
    providers that receive strict tool schemas. Callbacks may observe a failed attempt's partial
    output: ``on_error`` fires before each retry, and the next attempt streams from the start.
    """

    def __init__(
        self,
        *,
        stream: bool = True,
        logger: logging.Logger | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        strict_tool_providers: Collection[str] = DEFAULT_STRICT_TOOL_PROVIDERS,
    ) -> None:
        self.stream = stream
        self._logger = logger or logging.getLogger("helix_dbos.llm")
        self._sleep = sleep
        self._strict_providers = frozenset(strict_tool_providers)

    def check_input_files(self, config: LLMConfig, kinds: Collection[FileKind]) -> None:
        """Refuse, before a run starts, files the agent's model does not take (``validation_error``).

        The rule reads LiteLLM's bundled model map (offline): a model LiteLLM knows is refused images
        unless ``supports_vision``, PDFs unless ``supports_pdf_input``, audio unless
        ``supports_audio_input``. A model it does not know (``openai/<anything>`` at an ``api_base``, a
        self-hosted one) is given the benefit of the doubt: its server answers for itself. Declare a
        known model's abilities with ``litellm.register_model`` if the map is wrong.
        """
        needs = {"image": "supports_vision", "pdf": "supports_pdf_input", "audio": "supports_audio_input"}
        asked = sorted(k for k in kinds if k in needs)
        if not asked:
            return
        litellm = _import_litellm()
        try:
            litellm.get_model_info(config.model)
        except Exception:
            return  # not in LiteLLM's map
        from litellm import utils as litellm_utils

        refused = [k for k in asked if not getattr(litellm_utils, needs[k])(config.model)]
        if refused:
            what = ", ".join({"image": "images", "pdf": "PDFs", "audio": "audio"}[k] for k in refused)
            raise HelixError(
                f"Model {config.model!r} does not take {what} (LiteLLM's model map says so); nothing was "
                "started. Use a model that does, or send the content as text.",
                code="validation_error",
                retryable=False,
            )

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        """Call the model, retrying retryable failures; provider failures return ``ErrorStepResult``."""
        litellm = _import_litellm()
        request = _build_request(litellm, input, stream=self.stream, strict_providers=self._strict_providers)
        callbacks = input.callbacks or LLMStreamCallbacks()
        max_retries = input.config.max_retries
        attempt = 0
        while True:
            if input.abort_signal is not None and input.abort_signal.aborted:
                return _cancelled(input)
            try:
                return await self._attempt(litellm, request, input, callbacks)
            except _CallbackFailed as failed:
                raise failed.error from None
            except _Aborted:
                return _cancelled(input)
            except Exception as exc:
                error = classify_provider_error(exc, provider=request.provider)
            if not error.retryable or attempt >= max_retries:
                self._logger.warning(
                    "LLM call to %s failed after %d attempt(s): [%s] %s",
                    input.config.model,
                    attempt + 1,
                    error.code,
                    error.message,
                )
                return ErrorStepResult(error=error, should_stop=True, stop_reason="error")
            delay = retry_delay_seconds(attempt, error)
            self._logger.info(
                "LLM call to %s failed (attempt %d of %d): [%s] %s; retrying in %.2fs",
                input.config.model,
                attempt + 1,
                max_retries + 1,
                error.code,
                error.message,
                delay,
            )
            await _notify(callbacks.error(error))
            await self._sleep(delay)
            attempt += 1

    async def _attempt(
        self,
        litellm: Any,
        request: _Request,
        input: LLMGenerateInput,
        callbacks: LLMStreamCallbacks,
    ) -> StepResult:
        if self.stream:
            raw, fired = await self._stream(litellm, request, input, callbacks)
        else:
            raw, fired = await self._complete(litellm, request, callbacks), 0
        calls = _parsed_calls(raw, request.strict_schemas)
        for call in calls[fired:]:
            await _notify(callbacks.tool_call(call))
        return _step_result(raw, calls)

    async def _complete(self, litellm: Any, request: _Request, callbacks: LLMStreamCallbacks) -> _RawResponse:
        response = await litellm.acompletion(**request.kwargs)
        if not response.choices:
            raise HelixError("the provider returned no choices", code="provider_error", retryable=True)
        choice = response.choices[0]
        message = choice.message
        raw = _RawResponse(
            text=message.content or "",
            reasoning=getattr(message, "reasoning_content", None) or "",
            thinking_blocks=[dict(b) for b in getattr(message, "thinking_blocks", None) or ()],
            calls=[
                _RawCall(id=t.id, name=t.function.name or "", arguments=t.function.arguments or "")
                for t in message.tool_calls or ()
            ],
            finish_reason=choice.finish_reason,
            usage=getattr(response, "usage", None),
        )
        if raw.reasoning:
            await _notify(callbacks.thinking(raw.reasoning, False))
            await _notify(callbacks.thinking("", True))
        if raw.text:
            await _notify(callbacks.text_delta(raw.text))
        return raw

    async def _stream(
        self,
        litellm: Any,
        request: _Request,
        input: LLMGenerateInput,
        callbacks: LLMStreamCallbacks,
    ) -> tuple[_RawResponse, int]:
        """Consume a stream, reporting deltas live; returns the response and how many calls were reported."""
        stream = await litellm.acompletion(**request.kwargs)
        raw = _RawResponse()
        text: list[str] = []
        reasoning: list[str] = []
        by_index: dict[int, _RawCall] = {}
        fired = 0
        reasoning_open = False

        async def close_reasoning() -> None:
            nonlocal reasoning_open
            if reasoning_open:
                reasoning_open = False
                await _notify(callbacks.thinking("", True))

        async def report_complete_calls(upto: int) -> None:
            # A call is complete once a later index starts; report it if its JSON already parses.
            nonlocal fired
            ordered = [by_index[i] for i in sorted(by_index) if i < upto]
            while fired < len(ordered):
                call = ordered[fired]
                try:
                    arguments = json.loads(call.arguments) if call.arguments.strip() else {}
                except json.JSONDecodeError:
                    return
                schema = request.strict_schemas.get(call.name)
                if schema is not None:
                    arguments = _drop_optional_nulls(arguments, schema, schema)
                call.id = call.id or f"call_{uuid.uuid4().hex[:24]}"
                await _notify(callbacks.tool_call(ParsedToolCall(id=call.id, name=call.name, arguments=arguments)))
                fired += 1

        try:
            async for chunk in stream:
                if input.abort_signal is not None and input.abort_signal.aborted:
                    raise _Aborted()
                if getattr(chunk, "usage", None) is not None:
                    raw.usage = chunk.usage
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                raw.finish_reason = choice.finish_reason or raw.finish_reason
                delta = choice.delta
                piece = getattr(delta, "reasoning_content", None)
                if piece:
                    reasoning.append(piece)
                    reasoning_open = True
                    await _notify(callbacks.thinking(piece, False))
                for block in getattr(delta, "thinking_blocks", None) or ():
                    _merge_thinking_block(raw.thinking_blocks, dict(block))
                if delta.content:
                    await close_reasoning()
                    text.append(delta.content)
                    await _notify(callbacks.text_delta(delta.content))
                for tool_delta in delta.tool_calls or ():
                    await close_reasoning()
                    index = tool_delta.index if isinstance(tool_delta.index, int) else len(by_index)
                    if index not in by_index:
                        await report_complete_calls(index)
                        by_index[index] = _RawCall()
                    call = by_index[index]
                    call.id = tool_delta.id or call.id
                    function = tool_delta.function
                    if function is not None:
                        call.name = function.name or call.name
                        call.arguments += function.arguments or ""
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception:
                    self._logger.debug("closing the LLM stream failed", exc_info=True)
        await close_reasoning()
        raw.text, raw.reasoning = "".join(text), "".join(reasoning)
        raw.calls = [by_index[i] for i in sorted(by_index)]
        if _stream_was_cut(stream):
            # Name the broken tool call if there is one; it is the more useful message.
            _parsed_calls(raw, request.strict_schemas)
            raise HelixError(
                "the stream ended without a finish reason (connection dropped?); the response is incomplete",
                code="provider_error",
                retryable=True,
            )
        return raw, fired


def _stream_was_cut(stream: Any) -> bool:
    """Tell whether LiteLLM's stream wrapper never saw a provider finish reason.

    LiteLLM 1.106.2 synthesises ``finish_reason="stop"`` for a dropped connection, so the chunks
    cannot tell; its wrapper records whether the provider sent one. Without those attributes
    (another LiteLLM version) we cannot tell and trust the stream; broken tool-call JSON is still
    caught by :func:`_parse_arguments`.
    """
    if not hasattr(stream, "received_finish_reason"):
        return False
    return stream.received_finish_reason is None and getattr(stream, "intermittent_finish_reason", None) is None


def _cancelled(input: LLMGenerateInput) -> ErrorStepResult:
    reason = input.abort_signal.reason if input.abort_signal is not None else None
    error = HelixError(f"LLM call aborted: {reason or 'no reason given'}", code="framework_cancelled", retryable=False)
    return ErrorStepResult(error=error, should_stop=True, stop_reason="error")
