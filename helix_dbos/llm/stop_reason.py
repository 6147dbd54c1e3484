"""Provider finish reasons mapped onto the one :data:`StopReason` vocabulary (seed 002 "Stop Reason Mapping").

The orchestration layer decides what a step means (done, truncated, filtered) from the stop
reason alone, so every provider's spelling has to land on the same few values. Anything not
recognised becomes ``"unknown"``, never an exception: a new provider value must not fail a run.
"""

from __future__ import annotations

from collections.abc import Mapping

from helix_dbos.step_result import StopReason

__all__ = [
    "map_anthropic_stop_reason",
    "map_gemini_finish_reason",
    "map_litellm_finish_reason",
    "map_openai_finish_reason",
    "map_vercel_finish_reason",
]

_VERCEL: Mapping[str, StopReason] = {
    "stop": "end_turn",
    "tool-calls": "tool_use",
    "length": "max_tokens",
    "content-filter": "content_filter",
    "error": "error",
}

_OPENAI: Mapping[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
    "refusal": "refusal",
}

_ANTHROPIC: Mapping[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
    # A server-tool turn paused mid-way; the turn did not end normally, but nothing failed either.
    "pause_turn": "unknown",
}

_GEMINI: Mapping[str, StopReason] = {
    "stop": "end_turn",
    "max_tokens": "max_tokens",
    "safety": "content_filter",
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "spii": "content_filter",
    "image_safety": "content_filter",
    "language": "error",
    "malformed_function_call": "error",
    "unexpected_tool_call": "error",
    "other": "unknown",
    "finish_reason_unspecified": "unknown",
}


def _lookup(table: Mapping[str, StopReason], reason: str | None) -> StopReason:
    if not reason:
        return "unknown"
    return table.get(reason.strip().lower(), "unknown")


def map_openai_finish_reason(reason: str | None) -> StopReason:
    """OpenAI ``finish_reason`` (``stop``, ``tool_calls``, ``length``, ``content_filter``...)."""
    return _lookup(_OPENAI, reason)


def map_vercel_finish_reason(reason: str | None) -> StopReason:
    """The AI SDK's ``finishReason`` (``stop``, ``tool-calls``, ``length``, ``content-filter``...)."""
    return _lookup(_VERCEL, reason)


def map_anthropic_stop_reason(reason: str | None) -> StopReason:
    """Anthropic ``stop_reason`` (``end_turn``, ``tool_use``, ``max_tokens``, ``refusal``...)."""
    return _lookup(_ANTHROPIC, reason)


def map_gemini_finish_reason(reason: str | None) -> StopReason:
    """Gemini ``finishReason`` (``STOP``, ``MAX_TOKENS``, ``SAFETY``...), case-insensitive."""
    return _lookup(_GEMINI, reason)


def map_litellm_finish_reason(reason: str | None) -> StopReason:
    """LiteLLM's finish reason, normally already in OpenAI form.

    LiteLLM normalises provider values to OpenAI's (``end_turn`` -> ``stop``), but some paths let
    native values through, so the OpenAI table is tried first and the Anthropic and Gemini tables
    after it.
    """
    for table in (_OPENAI, _ANTHROPIC, _GEMINI):
        mapped = _lookup(table, reason)
        if mapped != "unknown":
            return mapped
    return "unknown"
