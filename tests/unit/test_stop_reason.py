import pytest

from helix_dbos.llm.stop_reason import (
    map_anthropic_stop_reason,
    map_gemini_finish_reason,
    map_litellm_finish_reason,
    map_openai_finish_reason,
)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("stop", "end_turn"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("length", "max_tokens"),
        ("content_filter", "content_filter"),
        ("refusal", "refusal"),
        (None, "unknown"),
        ("", "unknown"),
        ("something_new", "unknown"),
    ],
)
def test_openai(reason: str | None, expected: str) -> None:
    assert map_openai_finish_reason(reason) == expected


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", "end_turn"),
        ("stop_sequence", "stop_sequence"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("model_context_window_exceeded", "max_tokens"),
        ("refusal", "refusal"),
        ("pause_turn", "unknown"),
        (None, "unknown"),
        ("stop", "unknown"),
    ],
)
def test_anthropic(reason: str | None, expected: str) -> None:
    assert map_anthropic_stop_reason(reason) == expected


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("STOP", "end_turn"),
        ("MAX_TOKENS", "max_tokens"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("OTHER", "unknown"),
        ("FINISH_REASON_UNSPECIFIED", "unknown"),
        ("stop", "end_turn"),
        (None, "unknown"),
    ],
)
def test_gemini(reason: str | None, expected: str) -> None:
    assert map_gemini_finish_reason(reason) == expected


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("stop", "end_turn"),
        ("tool_calls", "tool_use"),
        ("length", "max_tokens"),
        ("content_filter", "content_filter"),
        # Native values LiteLLM sometimes lets through.
        ("end_turn", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("SAFETY", "content_filter"),
        (None, "unknown"),
        ("weird", "unknown"),
    ],
)
def test_litellm(reason: str | None, expected: str) -> None:
    assert map_litellm_finish_reason(reason) == expected
