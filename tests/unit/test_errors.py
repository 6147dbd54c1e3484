"""HelixError codes and categories, classification helpers and the specific error classes."""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any, get_args

import pytest
from pydantic import BaseModel, ValidationError

from helix_dbos.errors import (
    ERROR_CODES,
    AgentAlreadyRunningError,
    AgentNotResumableError,
    DefinitionError,
    ErrorCategory,
    ErrorCode,
    ExecutorSupersededError,
    HelixError,
    SessionNotFoundError,
    StaleStateError,
    StreamTruncatedError,
    category_of,
    classify_error,
    ensure_error,
    extract_error_message,
)

# The seeds' table (002 "Error Codes"), written out independently of the implementation.
EXPECTED_CATEGORIES: dict[str, str] = {
    "provider_overloaded": "provider",
    "provider_rate_limited": "provider",
    "provider_auth_error": "provider",
    "provider_content_filtered": "provider",
    "provider_refused": "provider",
    "provider_timeout": "provider",
    "provider_invalid_request": "provider",
    "provider_context_window_exceeded": "provider",  # a helix-dbos addition (long sessions)
    "provider_error": "provider",
    "provider_fallbacks_exhausted": "provider",
    "tool_input_invalid": "tool",
    "tool_execution_failed": "tool",
    "tool_not_found": "tool",
    "tool_timeout": "tool",
    "state_concurrency_conflict": "state",
    "state_session_not_found": "state",
    "state_already_running": "state",
    "state_not_resumable": "state",
    "state_agent_not_found": "state",
    "state_tool_call_not_found": "state",
    "state_checkpoint_not_found": "state",
    "state_conflict": "state",
    "state_agent_mismatch": "state",
    "state_schedule_not_found": "state",
    "transport_error": "transport",
    "validation_error": "validation",
    "validation_invalid_text": "validation",
    "validation_invalid_schedule": "validation",
    "framework_internal_error": "framework",
    "framework_not_supported": "framework",
    "framework_cancelled": "framework",
    "guardrail_tripped": "framework",
    "tenant_budget_exceeded": "framework",
}

EXPECTED_RETRYABLE = {
    "provider_overloaded",
    "provider_rate_limited",
    "provider_timeout",
    "provider_error",
    "transport_error",
}


def test_error_code_set_is_the_seeds_table() -> None:
    # The seeds' 21 codes, plus helix-dbos's: an unknown agent, tool call or checkpoint (404 over
    # HTTP), a request that conflicts with the session (409) or names another agent for it (409),
    # text that cannot be stored (422), every model of a fallback chain failing, a request over
    # the model's context window (a compaction policy compacts and retries on it), a guardrail
    # failing the run, a tenant over its budget (429), and an unknown or invalid agent schedule (404, 422).
    assert len(EXPECTED_CATEGORIES) == 33
    assert set(get_args(ErrorCode)) == set(EXPECTED_CATEGORIES)
    assert set(EXPECTED_CATEGORIES) == ERROR_CODES
    assert set(EXPECTED_CATEGORIES.values()) == set(get_args(ErrorCategory))


@pytest.mark.parametrize(("code", "category"), sorted(EXPECTED_CATEGORIES.items()))
def test_category_is_derived_from_the_code(code: Any, category: str) -> None:
    assert category_of(code) == category
    error = HelixError("m", code=code)
    assert error.code == code
    assert error.category == category


@pytest.mark.parametrize("code", sorted(EXPECTED_CATEGORIES))
def test_retryable_defaults(code: Any) -> None:
    assert HelixError("m", code=code).retryable is (code in EXPECTED_RETRYABLE)


@pytest.mark.parametrize("code", ["provider_overloaded", "validation_error"])
def test_explicit_retryable_overrides_the_default(code: Any) -> None:
    assert HelixError("m", code=code, retryable=False).retryable is False
    assert HelixError("m", code=code, retryable=True).retryable is True


def test_unknown_prefix_falls_back_to_framework() -> None:
    assert category_of("mystery_code") == "framework"  # type: ignore[arg-type]


def test_helix_error_defaults_and_fields() -> None:
    error = HelixError("something broke")
    assert str(error) == "something broke"
    assert error.message == "something broke"
    assert error.code == "framework_internal_error"
    assert error.category == "framework"
    assert error.retryable is False
    assert error.status_code is None
    assert error.retry_after_seconds is None
    assert error.__cause__ is None
    assert isinstance(error, Exception)


def test_helix_error_options() -> None:
    cause = OSError("socket")
    error = HelixError(
        "Provider overloaded",
        code="provider_overloaded",
        retryable=True,
        status_code=503,
        cause=cause,
        retry_after_seconds=2.5,
    )
    assert error.code == "provider_overloaded"
    assert error.category == "provider"
    assert error.retryable is True
    assert error.status_code == 503
    assert error.retry_after_seconds == 2.5
    assert error.__cause__ is cause
    assert repr(error) == "HelixError('Provider overloaded', code='provider_overloaded')"


def test_is_instance() -> None:
    assert HelixError.is_instance(HelixError("x"))
    assert HelixError.is_instance(StaleStateError("s", 1, 2))
    assert not HelixError.is_instance(ValueError("x"))
    assert not HelixError.is_instance({"code": "provider_error"})


# --------------------------------------------------------------------------- to_dict / from_dict


@pytest.mark.parametrize("code", sorted(EXPECTED_CATEGORIES))
def test_to_dict_from_dict_round_trip(code: Any) -> None:
    error = HelixError("msg", code=code, retryable=code not in EXPECTED_RETRYABLE, status_code=418)
    data = error.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data == {
        "message": "msg",
        "code": code,
        "category": EXPECTED_CATEGORIES[code],
        "retryable": code not in EXPECTED_RETRYABLE,
        "status_code": 418,
        "error_type": "HelixError",
    }
    back = HelixError.from_dict(data)
    assert type(back) is HelixError
    assert back.to_dict() == data


def test_to_dict_records_the_subclass_name_and_from_dict_keeps_the_code() -> None:
    error = StaleStateError("s", 1, 2)
    data = error.to_dict()
    assert data["error_type"] == "StaleStateError"
    back = HelixError.from_dict(data)
    assert back.code == "state_concurrency_conflict"
    assert back.category == "state"
    assert back.message == error.message
    assert back.retryable is True


def test_from_dict_tolerates_unknown_codes_and_missing_fields() -> None:
    back = HelixError.from_dict({"message": "x", "code": "not_a_code"})
    assert back.code == "framework_internal_error"
    assert back.retryable is False
    empty = HelixError.from_dict({})
    assert empty.message == ""
    assert empty.code == "framework_internal_error"
    assert empty.status_code is None


# --------------------------------------------------------------------------- specific classes


def test_definition_error() -> None:
    error = DefinitionError("bad tool")
    assert error.code == "validation_error"
    assert error.category == "validation"
    assert error.retryable is False
    assert isinstance(error, ValueError)
    assert isinstance(error, HelixError)
    assert error.message == "bad tool"


def test_agent_already_running_error() -> None:
    error = AgentAlreadyRunningError("sess-1", "running")
    assert (error.session_id, error.current_status) == ("sess-1", "running")
    assert error.code == "state_already_running"
    assert error.category == "state"
    assert error.retryable is False
    assert "'sess-1'" in error.message
    assert "'running'" in error.message


def test_agent_not_resumable_error() -> None:
    error = AgentNotResumableError("sess-1", "failed", reason="aborted by user")
    assert (error.session_id, error.current_status) == ("sess-1", "failed")
    assert error.code == "state_not_resumable"
    assert error.retryable is False
    assert error.message.endswith(": aborted by user")
    plain = AgentNotResumableError("sess-1", "completed")
    assert not plain.message.endswith(":")
    assert "'completed'" in plain.message


def test_session_not_found_error() -> None:
    error = SessionNotFoundError("sess-9")
    assert error.session_id == "sess-9"
    assert error.code == "state_session_not_found"
    assert error.retryable is False
    assert "'sess-9'" in error.message


def test_stale_state_error() -> None:
    error = StaleStateError("sess-1", expected_version=3, actual_version=5)
    assert (error.session_id, error.expected_version, error.actual_version) == ("sess-1", 3, 5)
    assert error.code == "state_concurrency_conflict"
    assert error.retryable is True
    assert "3" in error.message
    assert "5" in error.message


def test_executor_superseded_error() -> None:
    error = ExecutorSupersededError("sess-1")
    assert error.session_id == "sess-1"
    assert error.code == "state_concurrency_conflict"
    assert error.retryable is False


def test_stream_truncated_error() -> None:
    error = StreamTruncatedError("stream-1", last_valid_sequence=41, truncated_at_step=3)
    assert (error.stream_id, error.last_valid_sequence, error.truncated_at_step) == ("stream-1", 41, 3)
    assert error.code == "transport_error"
    assert error.category == "transport"
    # Explicitly not retryable, although transport_error defaults to retryable.
    assert error.retryable is False


ALL_SPECIFIC_ERRORS: list[HelixError] = [
    HelixError("plain", code="provider_rate_limited", status_code=429, retry_after_seconds=1.5),
    DefinitionError("bad"),
    AgentAlreadyRunningError("s", "running"),
    AgentNotResumableError("s", "failed", "why"),
    SessionNotFoundError("s"),
    StaleStateError("s", 1, 2),
    ExecutorSupersededError("s"),
    StreamTruncatedError("st", 10, 2),
]


@pytest.mark.parametrize("error", ALL_SPECIFIC_ERRORS, ids=lambda e: type(e).__name__)
def test_errors_survive_pickling(error: HelixError) -> None:
    # DBOS pickles exceptions raised by steps and workflows and unpickles them on recovery.
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.args == error.args
    assert vars(back) == vars(error)
    assert back.category == error.category
    assert back.retryable == error.retryable


# --------------------------------------------------------------------------- extract_error_message


class _WithMessage:
    message = "from attribute"


class _WithNonStringMessage:
    message = 42

    def __str__(self) -> str:
        return "str of object"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Exception("test"), "test"),
        (ValueError("bad value"), "bad value"),
        (HelixError("helix message", code="tool_timeout"), "helix message"),
        ({"message": "Overloaded"}, "Overloaded"),
        (_WithMessage(), "from attribute"),
        ("plain string", "plain string"),
        ("", ""),
        (None, "null"),
        (_WithNonStringMessage(), "str of object"),
        (42, "42"),
    ],
)
def test_extract_error_message(value: Any, expected: str) -> None:
    assert extract_error_message(value) == expected


def test_extract_error_message_of_an_empty_exception_is_its_type_name() -> None:
    assert extract_error_message(RuntimeError()) == "RuntimeError"


def test_extract_error_message_dict_without_string_message_falls_back_to_str() -> None:
    value = {"message": 3, "code": "x"}
    assert extract_error_message(value) == str(value)
    assert extract_error_message({"error": "x"}) == str({"error": "x"})


# --------------------------------------------------------------------------- ensure_error


def test_ensure_error_returns_exceptions_unchanged() -> None:
    error = KeyError("k")
    assert ensure_error(error) is error
    cancelled = asyncio.CancelledError()
    assert ensure_error(cancelled) is cancelled


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"message": "Overloaded"}, "Overloaded"),
        ("plain", "plain"),
        (None, "null"),
        (12, "12"),
        (_WithMessage(), "from attribute"),
    ],
)
def test_ensure_error_wraps_non_exceptions_keeping_the_original(value: Any, message: str) -> None:
    error = ensure_error(value)
    assert isinstance(error, HelixError)
    assert str(error) == message
    assert error.original is value  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- classify_error


def test_classify_passes_helix_errors_through() -> None:
    for error in ALL_SPECIFIC_ERRORS:
        assert classify_error(error) is error


@pytest.mark.parametrize("error", [asyncio.CancelledError(), asyncio.CancelledError("stop"), KeyboardInterrupt()])
def test_classify_cancellation(error: BaseException) -> None:
    classified = classify_error(error)
    assert classified.code == "framework_cancelled"
    assert classified.category == "framework"
    assert classified.retryable is False
    assert classified.__cause__ is error
    assert classified.message


def test_classify_pydantic_validation_error() -> None:
    class M(BaseModel):
        x: int

    with pytest.raises(ValidationError) as info:
        M.model_validate({"x": "nope"})
    classified = classify_error(info.value)
    assert classified.code == "validation_error"
    assert classified.category == "validation"
    assert classified.retryable is False
    assert classified.__cause__ is info.value
    assert "x" in classified.message


@pytest.mark.parametrize("error", [TimeoutError("took too long"), TimeoutError()])
def test_classify_timeout(error: BaseException) -> None:
    classified = classify_error(error)
    assert classified.code == "provider_timeout"
    assert classified.category == "provider"
    assert classified.retryable is True
    assert classified.__cause__ is error
    assert classified.message


def test_classify_timeout_keeps_its_message() -> None:
    assert classify_error(TimeoutError("took too long")).message == "took too long"


def test_classify_not_implemented() -> None:
    error = NotImplementedError("no streaming")
    classified = classify_error(error)
    assert classified.code == "framework_not_supported"
    assert classified.retryable is False


@pytest.mark.parametrize("error", [RuntimeError("boom"), ValueError("bad"), KeyError("k"), OSError("io")])
def test_classify_generic_exceptions(error: BaseException) -> None:
    classified = classify_error(error)
    assert type(classified) is HelixError
    assert classified.code == "framework_internal_error"
    assert classified.category == "framework"
    assert classified.retryable is False
    assert classified.__cause__ is error
    assert classified.message == extract_error_message(error)


@pytest.mark.parametrize("value", [{"message": "Overloaded"}, "plain", None])
def test_classify_non_exceptions(value: Any) -> None:
    classified = classify_error(value)
    assert classified.code == "framework_internal_error"
    assert classified.message == extract_error_message(value)


def test_classify_a_class_named_validation_error_that_is_not_pydantic() -> None:
    # Matching by name is deliberate (any library's ValidationError means invalid input).
    class ValidationError(Exception):
        pass

    assert classify_error(ValidationError("bad input")).code == "validation_error"
