"""Which wake-up answers a hot wait without a ``hitl.check`` (``helix_dbos.runtime.hitl.rows_with_answer``),
and which continuation check stands in for a registration (``registration_from_check``)."""

from __future__ import annotations

from typing import Any

from helix_dbos.runtime.hitl import registration_from_check, rows_with_answer
from helix_dbos.runtime.step_outputs import CheckStepOutput, PendingRow


def row(
    call_id: str, status: str = "pending", *, run_id: str = "r1", created_at: int = 100, **extra: Any
) -> PendingRow:
    base: dict[str, Any] = {
        "session_id": "s",
        "tool_call_id": call_id,
        "run_id": run_id,
        "workflow_id": "w",
        "tool_name": "ask",
        "kind": "client",
        "arguments": {},
        "arguments_digest": "d",
        "status": status,
        "delivery": "hot",
        "submission": None,
        "deadline_ms": None,
        "created_at": created_at,
        "answered_at": None,
    }
    return {**base, **extra}  # type: ignore[return-value]


def answer(call_id: str, **kw: Any) -> dict[str, Any]:
    return {"wake": call_id, "answer": row(call_id, "answered", submission={"result": "y"}, answered_at=150, **kw)}


def test_the_last_answer_completes_the_batch() -> None:
    rows = {"a": row("a", "answered"), "b": row("b")}
    merged = rows_with_answer(answer("b"), rows, ["a", "b"])
    assert merged is not None and merged["b"]["status"] == "answered" and merged["a"] is rows["a"]


def test_an_answer_with_calls_still_open_needs_a_check() -> None:
    assert rows_with_answer(answer("a"), {"a": row("a"), "b": row("b")}, ["a", "b"]) is None


def test_wake_ups_without_an_answer_need_a_check() -> None:
    rows = {"a": row("a")}
    for message in ({"wake": "a"}, {"wake": "abort"}, {"wake": "interrupt"}, None, "x", {"wake": "a", "answer": None}):
        assert rows_with_answer(message, rows, ["a"]) is None


def test_a_left_over_wake_up_never_answers_another_registration() -> None:
    rows = {"a": row("a", run_id="r2", created_at=200)}
    assert rows_with_answer(answer("a"), rows, ["a"]) is None  # same id, earlier run's row
    assert rows_with_answer(answer("a", run_id="r2"), rows, ["a"]) is None  # same run, earlier registration
    assert rows_with_answer(answer("x"), {"x": row("x"), **rows}, ["a"]) is None  # not a call of this wait


def test_only_a_pending_call_takes_an_answer_and_only_an_answered_row_is_one() -> None:
    assert rows_with_answer(answer("a"), {"a": row("a", "expired")}, ["a"]) is None  # the check saw it final
    expired = {"wake": "a", "answer": row("a", "expired")}
    assert rows_with_answer(expired, {"a": row("a")}, ["a"]) is None


def check(rows: dict[str, PendingRow], *, stands_in: bool = True, **flags: bool) -> CheckStepOutput:
    out: CheckStepOutput = {"now_ms": 500, "rows": rows, "aborted": False, "interrupted": False, "parked": False}
    out.update(flags)  # type: ignore[typeddict-item]
    if stands_in:
        out["replaces_registration"] = True
    return out


def test_an_answered_batch_needs_no_registration() -> None:
    rows = {"a": row("a", "answered", deadline_ms=900), "b": row("b", "expired", arguments_digest="e")}
    first = check(rows)
    registration = registration_from_check(first, ["a", "b"])
    assert registration == {
        "hot_deadline_ms": 500,
        "deadlines": {"a": 900, "b": None},
        "digests": {"a": "d", "b": "e"},
        "check": first,
        "answers_in_wakes": True,
    }


def test_a_continuation_registers_when_its_check_cannot_stand_in() -> None:
    answered = {"a": row("a", "answered")}
    assert registration_from_check(check(answered, stands_in=False), ["a"]) is None  # recorded by an older version
    assert registration_from_check(check({"a": row("a", "answered"), "b": row("b")}), ["a", "b"]) is None  # open
    assert registration_from_check(check(answered), ["a", "b"]) is None  # a call without a row
    assert registration_from_check(check(answered, aborted=True), ["a"]) is None
    assert registration_from_check(check(answered, interrupted=True), ["a"]) is None
