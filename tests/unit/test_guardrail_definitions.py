"""Guardrail definitions and the built-ins' pure logic: bad definitions refused, redaction, loop counting."""

from __future__ import annotations

import pytest

from helix_dbos.errors import DefinitionError
from helix_dbos.guardrails import Guardrails, define_guardrail, max_repeated_calls, redact_secrets
from helix_dbos.guardrails.checks import run_checks
from helix_dbos.guardrails.definitions import GuardrailInput, PreviousCall


def given(stage: str, value: object, **extra: object) -> GuardrailInput:
    return GuardrailInput(stage=stage, value=value, agent="a", session_id="s", run_id="r", **extra)  # type: ignore[arg-type]


def test_bad_definitions_are_refused_with_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="stages"):
        define_guardrail("g", lambda g: None, stages="everywhere")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="tool stages only"):
        define_guardrail("g", lambda g: None, stages="output", on_trip="approve")
    with pytest.raises(DefinitionError, match="name"):
        define_guardrail("no spaces", lambda g: None, stages="input")
    with pytest.raises(DefinitionError, match="two guardrails"):
        Guardrails([redact_secrets(), redact_secrets()])


def test_the_redactor_rewrites_nested_strings_and_counts_by_kind() -> None:
    guard = redact_secrets()
    value = {"a": ["key AKIAABCDEFGHIJKLMNOP", {"b": "mail x@y.io and z@w.org"}], "n": 3}
    (verdict,) = run_checks([(guard, given("tool_result", value, tool_call_id="c"))])["verdicts"]
    assert not verdict["tripped"] and verdict["rewritten"]
    assert verdict["rewrite"] == {
        "a": ["key [REDACTED:aws_access_key_id]", {"b": "mail [REDACTED:email] and [REDACTED:email]"}],
        "n": 3,
    }
    assert verdict["info"] == {"redacted": {"aws_access_key_id": 1, "email": 2}}


def test_the_loop_guard_counts_equal_calls_only() -> None:
    guard = max_repeated_calls(2)
    previous = (PreviousCall("t", {"x": 1, "y": 2}), PreviousCall("t", {"y": 2, "x": 1}), PreviousCall("t", {"x": 9}))
    same = given("tool_call", {"x": 1, "y": 2}, tool_name="t", tool_call_id="c", previous_calls=previous)
    other = given("tool_call", {"x": 9}, tool_name="t", tool_call_id="d", previous_calls=previous)
    verdicts = run_checks([(guard, same), (guard, other)])["verdicts"]
    assert [v["tripped"] for v in verdicts] == [True, False]


def test_a_check_returning_something_else_fails_closed() -> None:
    guard = define_guardrail("odd", lambda g: "yes", stages="input")  # type: ignore[arg-type,return-value]
    (verdict,) = run_checks([(guard, given("input", "hi"))])["verdicts"]
    assert verdict["tripped"] and verdict["error"] is not None and "TypeError" in verdict["error"]
