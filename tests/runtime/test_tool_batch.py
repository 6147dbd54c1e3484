"""``split_tool_batch``: a step's tool calls by phase (pure; no DBOS, no database)."""

from __future__ import annotations

from typing import Any

from helix_dbos.orchestration.tool_batch import HitlRequest, split_tool_batch, unknown_tool_message
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.tool import Tool, define_tool


def _run(_: Any, __: Any) -> str:
    return "ok"


def _gate(_: Any) -> bool:
    return True


SEARCH = define_tool("search", execute=_run)
FETCH = define_tool("fetch", execute=_run)
LOCATE = define_tool("locate", execute="client")
PAY = define_tool("pay", execute=_run, require_approval=True)
MAYBE = define_tool("maybe_pay", execute=_run, require_approval=_gate)
ANSWER = define_tool("answer", execute=_run, finish_with=True)
DECLARED = Tool(name="declared")  # nothing to execute
TOOLS = {t.name: t for t in (SEARCH, FETCH, LOCATE, PAY, MAYBE, ANSWER, DECLARED)}


def call(call_id: str, name: str) -> ParsedToolCall:
    return ParsedToolCall(id=call_id, name=name, arguments={})


def never(_: ParsedToolCall, __: Tool) -> bool:
    raise AssertionError("no gate should be asked")


def test_each_kind_of_call_lands_in_its_phase_in_input_order() -> None:
    calls = [
        call("1", "answer"),
        call("2", "search"),
        call("3", "locate"),
        call("4", "nope"),
        call("5", "fetch"),
        call("6", "declared"),
        call("7", "pay"),
    ]
    batch = split_tool_batch(calls, TOOLS, requires_approval=lambda c, t: t.require_approval is True)
    assert [(c.id, t.name) for c, t in batch.regular] == [("2", "search"), ("5", "fetch")]
    assert batch.hitl == [HitlRequest(calls[2], LOCATE, "client"), HitlRequest(calls[6], PAY, "approval")]
    assert [(c.id, t.name) for c, t in batch.finishing] == [("1", "answer")]
    assert list(batch.rejected) == ["4", "6"]
    assert batch.rejected["4"] == unknown_tool_message("nope", TOOLS)
    assert batch.closed_pending == []


def test_the_gate_is_asked_once_per_gated_call_in_call_order_and_decides_its_phase() -> None:
    asked: list[str] = []

    def gate(c: ParsedToolCall, tool: Tool) -> bool:
        asked.append(c.id)
        return c.id != "a"

    calls = [call("a", "maybe_pay"), call("s", "search"), call("b", "maybe_pay"), call("c", "pay")]
    batch = split_tool_batch(calls, TOOLS, requires_approval=gate)
    assert asked == ["a", "b", "c"]  # never for ungated tools
    assert [c.id for c, _ in batch.regular] == ["a", "s"]
    assert [(h.call.id, h.kind) for h in batch.hitl] == [("b", "approval"), ("c", "approval")]


def test_invalid_arguments_are_rejected_with_their_message_and_never_gated() -> None:
    batch = split_tool_batch(
        [call("x", "pay"), call("y", "search")],
        TOOLS,
        requires_approval=never,
        invalid_arguments={"x": "arguments must be an object"},
    )
    assert batch.rejected == {"x": "arguments must be an object"}
    assert [c.id for c, _ in batch.regular] == ["y"]


def test_a_continuation_keeps_registered_calls_human_answered_and_closes_unknown_ones() -> None:
    """Calls the suspended run registered stay HITL with their recorded kind, gate or not."""
    batch = split_tool_batch(
        [call("p", "pay"), call("q", "search"), call("r", "gone")],
        TOOLS,
        requires_approval=never,
        pending_kinds={"p": "approval", "q": "client", "r": "client"},
    )
    assert [(h.call.id, h.kind) for h in batch.hitl] == [("p", "approval"), ("q", "client")]
    assert list(batch.rejected) == ["r"] and batch.closed_pending == ["r"]


def test_an_unknown_tool_message_lists_the_executable_tools_and_cuts_a_long_name() -> None:
    message = unknown_tool_message("x" * 300, TOOLS)
    assert message.startswith("Unknown tool '" + "x" * 200 + "...'")
    assert message.endswith("Available tools: answer, fetch, locate, maybe_pay, pay, search.")
    assert unknown_tool_message("a", {}) == "Unknown tool 'a'. Available tools: none."
