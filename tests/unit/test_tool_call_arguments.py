"""Tool-call arguments a model produced: which are objects, and what the model is told when not."""

from __future__ import annotations

from typing import Any

import pytest

from helix_dbos.orchestration.step_processor import (
    coerce_tool_call_arguments,
    tool_call_argument_error,
    tool_call_argument_errors,
)
from helix_dbos.step_result import ParsedToolCall, ToolCallsStepResult


@pytest.mark.parametrize("raw", [{}, {"a": [1, {"b": None}]}, "", "  ", '{"a": 1}', '{"t": "\\u0000"}'])
def test_objects_and_blank_arguments_are_fine(raw: Any) -> None:
    assert tool_call_argument_error(raw) is None
    assert isinstance(coerce_tool_call_arguments(raw), dict)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{", "not valid JSON"),
        ('{"a": Infinity}', "not valid JSON"),
        ("NaN", "not valid JSON"),
        ("[]", "not an array"),
        ('"x"', "not a string"),
        ("null", "not null"),
        ("3", "not a number"),
        (None, "not null"),
        ([1], "not an array"),
        ({"a": float("inf")}, "Infinity or NaN"),
        ({"a": [{"b": float("nan")}]}, "Infinity or NaN"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_arguments_that_are_not_a_json_object(raw: Any, why: str) -> None:
    problem = tool_call_argument_error(raw)
    assert problem is not None and why in problem
    assert coerce_tool_call_arguments(raw) == {}  # what the transcript keeps


def test_errors_per_call_name_the_tool_and_say_what_to_do() -> None:
    step = ToolCallsStepResult(
        tool_calls=[
            ParsedToolCall(id="ok", name="t", arguments={"a": 1}),
            ParsedToolCall(id="bad", name="x" * 500, arguments="{"),
        ],
        stop_reason="tool_use",
    )
    errors = tool_call_argument_errors(step)
    assert list(errors) == ["bad"]
    assert errors["bad"].startswith("Invalid arguments for tool '" + "x" * 200 + "...'")
    assert "Call it again with a JSON object" in errors["bad"]
