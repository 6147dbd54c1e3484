"""Response assembly: a provider's raw answer (streamed or not) -> one :data:`StepResult`.

:class:`RawResponse` is what both paths collect: the text, reasoning, tool calls with their
arguments still as JSON strings, the finish reason and usage. :func:`step_result` turns it into the
step's answer. Two LiteLLM 1.106.2 behaviours shape it: the loop is driven by tool calls, not
finish reasons (streaming keeps ``stop`` even when tool calls were returned), and tool-call JSON
that does not parse means the stream was cut, a retryable ``provider_error``, except after
``finish_reason="length"``, when ``max_output_tokens`` cut it and retrying would cut it again: then
the raw string is kept and the step reports ``stop_reason="max_tokens"``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from helix_dbos.errors import HelixError
from helix_dbos.llm.litellm.schema import drop_optional_nulls
from helix_dbos.llm.stop_reason import map_litellm_finish_reason
from helix_dbos.messages import ThinkingContent
from helix_dbos.step_result import (
    ParsedSubAgentCall,
    ParsedToolCall,
    StepResult,
    StopReason,
    StructuredOutputStepResult,
    TextStepResult,
    TokenUsage,
    ToolCallsStepResult,
)
from helix_dbos.tool import SUBAGENT_TOOL_PREFIX

__all__ = [
    "RawCall",
    "RawResponse",
    "new_call_id",
    "parsed_calls",
    "raw_response_from_completion",
    "step_result",
    "token_usage",
]


@dataclass
class RawCall:
    """A tool call as the provider sent it; ``arguments`` is the JSON text, possibly still growing."""

    id: str | None = None
    name: str = ""
    arguments: str = ""


@dataclass
class RawResponse:
    """Everything one attempt collected, before parsing."""

    text: str = ""
    reasoning: str = ""
    thinking_blocks: list[dict[str, Any]] = field(default_factory=list)
    calls: list[RawCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Any = None


def new_call_id() -> str:
    """An id for a tool call the provider sent without one (some OpenAI-compatible servers do)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def raw_response_from_completion(response: Any) -> RawResponse:
    """Collect a non-streamed ``litellm.acompletion`` response."""
    if not response.choices:
        raise HelixError("the provider returned no choices", code="provider_error", retryable=True)
    choice = response.choices[0]
    message = choice.message
    return RawResponse(
        text=message.content or "",
        reasoning=getattr(message, "reasoning_content", None) or "",
        thinking_blocks=[dict(b) for b in getattr(message, "thinking_blocks", None) or ()],
        calls=[
            RawCall(id=t.id, name=t.function.name or "", arguments=t.function.arguments or "")
            for t in message.tool_calls or ()
        ],
        finish_reason=choice.finish_reason,
        usage=getattr(response, "usage", None),
    )


def _not_json(name: str) -> Any:
    # Python's parser accepts Infinity / NaN; JSON (and every JSON store) does not.
    raise json.JSONDecodeError(f"{name} is not valid JSON", name, 0)


def _parse_arguments(call: RawCall, *, truncated_ok: bool) -> Any:
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


def token_usage(usage: Any, *, model: str | None = None, cost_usd: float | None = None) -> TokenUsage | None:
    """LiteLLM's ``usage`` object as :class:`TokenUsage` (``None`` when the provider sent none)."""
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
        cost_usd=cost_usd,
        model=model,
    )


def _thinking(raw: RawResponse) -> ThinkingContent | None:
    if not raw.reasoning and not raw.thinking_blocks:
        return None
    signature = next((b["signature"] for b in reversed(raw.thinking_blocks) if b.get("signature")), None)
    content = raw.reasoning or "".join(str(b.get("thinking") or "") for b in raw.thinking_blocks)
    return ThinkingContent(content=content, signature=signature, blocks=raw.thinking_blocks or None)


def parsed_calls(raw: RawResponse, strict_schemas: Mapping[str, dict[str, Any]]) -> list[ParsedToolCall]:
    """Parse every tool call's arguments; raises a retryable ``provider_error`` for cut-off JSON.

    Calls to tools sent in strict form (their original schemas in ``strict_schemas``) lose the
    ``null`` values strict mode forced on optional fields.
    """
    truncated_ok = map_litellm_finish_reason(raw.finish_reason) == "max_tokens"
    calls = []
    for call in raw.calls:
        arguments = _parse_arguments(call, truncated_ok=truncated_ok)
        schema = strict_schemas.get(call.name)
        if schema is not None:
            arguments = drop_optional_nulls(arguments, schema, schema)
        calls.append(ParsedToolCall(id=call.id or new_call_id(), name=call.name, arguments=arguments))
    return calls


def _structured_output(raw: RawResponse, strict_schema: dict[str, Any] | None) -> Any:
    """The answer of a ``response_format`` request: its JSON, or the text as sent when it is not JSON.

    Text that does not parse is kept, not refused: the loop repairs what it can and asks the
    model again for the rest, which a retry of the same request here could not do.
    """
    try:
        value = json.loads(raw.text, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return raw.text
    return drop_optional_nulls(value, strict_schema, strict_schema) if strict_schema is not None else value


def step_result(
    raw: RawResponse,
    calls: list[ParsedToolCall],
    usage: TokenUsage | None = None,
    *,
    structured_output: bool = False,
    strict_output_schema: dict[str, Any] | None = None,
) -> StepResult:
    """The step's answer: text, tool and sub-agent calls, or a ``response_format`` request's output.

    Calls are split into tools and sub-agents by the sub-agent prefix. With ``structured_output``
    (native output mode) an answer without tool calls that ended its turn is the output.

    ``usage`` is the response's priced usage; without it, the raw usage unpriced.
    """
    stop_reason: StopReason = map_litellm_finish_reason(raw.finish_reason)
    usage, thinking = usage or token_usage(raw.usage), _thinking(raw)
    if not calls and structured_output and raw.text.strip() and stop_reason in ("end_turn", "stop_sequence"):
        return StructuredOutputStepResult(
            output=_structured_output(raw, strict_output_schema), stop_reason=stop_reason, usage=usage
        )
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
