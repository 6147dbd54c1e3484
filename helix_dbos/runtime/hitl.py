"""Human in the loop: approval gates, pending calls, waiting and parking; answers and wake-ups.

A step's tool calls meet this module through :class:`~helix_dbos.runtime.hitl_capability.HitlCapability`
(the tool phases know it only as a capability); budget approvals use the same wait.

A batch of tool calls that contains client-executed or approval-gated calls goes like this:

1. gates: a predicate ``require_approval`` is evaluated in its own step (``{agent}.approval_gate.{tool}``)
   so its boolean is checkpointed; a predicate that raises requires approval (fail closed);
2. ``{agent}.hitl.register`` records the calls in the store as pending and fixes the hot-window
   deadline (both checkpointed, so a recovered run waits against the same clock); it also takes
   the first check (below), so a batch answered before it waits goes straight on, and a zero hot
   window parks right there;
3. the *hot* wait: ``DBOS.recv`` on the run's HITL topic, woken by ``submit_tool_result``. A wake-up
   that carries the answer completing the batch (the row as the submission's transaction recorded
   it, which ``recv`` records in turn) ends the wait. Any other wake (or a timeout) is followed by
   ``{agent}.hitl.check``, which reads the answers from the store, expires calls past their
   deadline, and records the time it looked, so every decision the loop takes on replay comes from
   recorded values;
4. when the hot window has ended (or the run is interrupted) with answers missing, that check also
   flips the open rows to ``parked`` in one compare-and-set, and the run ends as
   ``suspended_client_tool``; its workflow (and thread) are gone. The submission that completes the
   batch starts the continuation run. (``{agent}.hitl.park`` is that flip as a step of its own, for
   a registration that already had the window over, and for runs recorded by older versions.)
5. ``{agent}.hitl.resumed`` fires ``on_agent_resumed``, only when a hook set defines it.

So a parked run takes register, check (then parks), or register alone with a zero hot window; a
hot run answered in one submission takes register and ``recv``: the answer is read once (by the
submission) and recorded once (by ``recv``). The continuation of a parked batch takes one check,
which finds the answers and stands in for its registration (:func:`registration_from_check`).

Outside the workflow, ``submit_tool_result`` checks an answer against its pending call
(:func:`check_submission_fits`) and records it in one store transaction, which also holds the
run's wake-up when the store shares DBOS's database (:mod:`helix_dbos.runtime.wake`), else wakes
the run after it (:func:`~.hitl_wake.wake_run`): the check runs on the row it is about to flip, so an answer is
refused or recorded, never half of either.

The store decides every answer: a message only ever carries a row the store made final (an
``answered`` row never changes again), and only for a call the run's last check saw pending in the
same registration, so a message that arrives late, twice, or never cannot change a result.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Literal

from dbos import DBOS
from pydantic import ValidationError

from helix_dbos.agent import AgentHooks
from helix_dbos.errors import HelixError
from helix_dbos.observability import run_observer as observe
from helix_dbos.orchestration.tool_batch import HitlRequest
from helix_dbos.runtime import services, step_names
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.client_tool_log import log_call_event, timeout_ms_of
from helix_dbos.runtime.hitl_wake import HITL_TOPIC, pending_row, wake_message, wake_run
from helix_dbos.runtime.hooks import RunPayload, fire
from helix_dbos.runtime.run_request import RunIdentity
from helix_dbos.runtime.step_outputs import (
    CheckStepOutput,
    GateStepOutput,
    ParkStepOutput,
    PendingRow,
    RegisterStepOutput,
    ResumedStepOutput,
)
from helix_dbos.session import ApprovalResponse, SubmitToolResult, SubmitToolResultAdapter
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.store.base import PendingToolCall
from helix_dbos.store.engine import now_ms
from helix_dbos.stream.chunks import canonical_arguments_digest
from helix_dbos.tool import Tool

DEFAULT_HOT_WINDOW_SECONDS = 60.0


def evaluate_gate_step(tool: Tool, arguments: dict[str, Any], session_id: str) -> GateStepOutput:
    """Evaluate a predicate ``require_approval``; any exception means approval is required."""
    predicate = tool.require_approval
    try:
        tool_input = tool.validate_input(arguments)
        assert callable(predicate)
        params = len(inspect.signature(predicate).parameters)
        result = predicate(tool_input, {"session_id": session_id}) if params >= 2 else predicate(tool_input)
        if inspect.isawaitable(result):
            awaitable: Any = result

            async def _await() -> Any:
                return await awaitable

            result = background_loop.run(_await())
        return {"required": bool(result), "error": None}
    except Exception as exc:  # fail closed
        return {"required": True, "error": f"{type(exc).__name__}: {exc}"}


def needs_approval(run_agent: str, tool: Tool, call: ParsedToolCall, session_id: str) -> bool:
    """Workflow code: decide the gate for one call (a checkpointed step for predicates)."""
    if tool.require_approval is True:
        return True
    if tool.require_approval is False:
        return False
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    out: GateStepOutput = DBOS.run_step(
        {"name": step_names.approval_gate(run_agent, tool.name)}, evaluate_gate_step, tool, arguments, session_id
    )
    return bool(out["required"])


def register_step(
    who: RunIdentity,
    calls: list[HitlRequest],
    hot_window_seconds: float,
    hooks: list[AgentHooks],
    announce: bool = True,
) -> RegisterStepOutput:
    """Record the calls as pending (idempotent) and fix the hot-window deadline.

    ``announce`` fires ``on_agent_suspended``; a continuation answering the batch its previous run
    suspended on does not announce it again (it fires ``on_agent_resumed`` once the answers are in).
    Announced calls are the model's new calls: a finished row an earlier call with the same id left
    (an earlier turn's or step's: models reuse call ids) is replaced, never taken as their answer.
    A continuation takes over its predecessor's rows, answers and all.
    """
    rt = services.current()
    now = now_ms()
    rows = [
        PendingToolCall(
            session_id=who.session_id,
            tool_call_id=c.call.id,
            run_id=who.run_id,
            workflow_id=who.workflow_id,
            tool_name=c.tool.name,
            kind=c.kind,
            arguments=c.call.arguments if isinstance(c.call.arguments, dict) else {},
            arguments_digest=canonical_arguments_digest(c.call.arguments),
            deadline_ms=now + c.tool.timeout_ms if c.tool.timeout_ms else None,
            created_at=now,
        )
        for c in calls
    ]
    rt.store.pending.register(rows, fresh=announce)
    if announce:
        for row in rows:
            log_call_event("suspended", row, kind=row.kind, agent_type=who.agent.name, timeout_ms=timeout_ms_of(row))
            if who.root_session_id is not None and who.root_session_id != who.session_id:
                log_call_event("ownership_recorded", row, root_session_id=who.root_session_id)
        fire(
            hooks,
            "on_agent_suspended",
            RunPayload(
                who.session_id,
                who.run_id,
                who.agent.name,
                "suspended_client_tool",
                extra={"tool_call_ids": [c.call.id for c in calls], "reason": "client_tool"},
            ),
            rt.logger,
        )
    hot_deadline = now + int(hot_window_seconds * 1000)
    # A zero window (or an interrupt already requested) parks right here: no recv, no second check.
    return _registration(hot_deadline, _check(who, [c.call.id for c in calls], now, hot_deadline))


def _registration(hot_deadline_ms: int, first: CheckStepOutput) -> RegisterStepOutput:
    """A registration as the wait reads it: the deadlines and digests of its first check's rows."""
    return {
        "hot_deadline_ms": hot_deadline_ms,
        "deadlines": {cid: r["deadline_ms"] for cid, r in first["rows"].items()},
        "digests": {cid: r["arguments_digest"] for cid, r in first["rows"].items()},
        "check": first,
        "answers_in_wakes": True,
    }


def check_step(
    who: RunIdentity, call_ids: list[str], hot_deadline_ms: int | None = None, continuation: bool = False
) -> CheckStepOutput:
    """Read the answers, expire overdue calls, read the control flags; park when the wait is over.

    The wait is over when the hot window has ended (``hot_deadline_ms``; ``None`` never parks) or
    the run is interrupted, with calls still open and the run not aborted. ``continuation``: the
    first check of a run answering the batch its previous run suspended on, which may stand in for
    that run's registration (:func:`registration_from_check`).
    """
    check = _check(who, call_ids, now_ms(), hot_deadline_ms)
    if continuation:
        check["replaces_registration"] = True
    return check


def registration_from_check(check: CheckStepOutput, call_ids: list[str]) -> RegisterStepOutput | None:
    """A continuation's registration made from its first check; ``None`` when it must register.

    The check stands in when it found every call of the batch answered or expired: registering such
    a batch again would write nothing (a row keeps its answer) and read the same final rows again.
    Only a check recorded as able to stand in counts, so a continuation recorded by an older version
    replays its ``hitl.register`` step.
    """
    rows = check["rows"]
    if not check.get("replaces_registration") or check["aborted"] or check["interrupted"]:
        return None
    if any(cid not in rows or rows[cid]["status"] == "pending" for cid in call_ids):
        return None
    return _registration(int(check["now_ms"]), check)


def _check(who: RunIdentity, call_ids: list[str], now: int, hot_deadline_ms: int | None) -> CheckStepOutput:
    """The check (inside a step): one read of rows and session; a write only to expire or park."""
    observe.current().executing()  # a check that runs here (not replayed) may be a recovery's first step
    pending = services.current().store.pending
    rows, session = pending.get_with_session(who.session_id, call_ids)
    due = [r.tool_call_id for r in rows if r.status == "pending" and r.deadline_ms is not None and r.deadline_ms <= now]
    if due:
        expired = set(pending.expire(who.session_id, due, now))
        for row in rows:
            if row.tool_call_id in expired:
                log_call_event("timeout", row, logging.WARNING, timeout_ms=timeout_ms_of(row))
        rows, session = pending.get_with_session(who.session_id, call_ids)
    aborted = bool(session and (session.aborted or session.status == "failed"))
    interrupted = bool(session and session.interrupt_requested)
    open_calls = any(r.status == "pending" for r in rows)
    ended = hot_deadline_ms is not None and (interrupted or now >= hot_deadline_ms)
    parked = not aborted and open_calls and ended
    if parked:
        wanted = set(call_ids)
        rows = [r for r in pending.park(who.session_id, who.run_id) if r.tool_call_id in wanted]
    return {
        "now_ms": now,
        "rows": {r.tool_call_id: pending_row(r) for r in rows},
        "aborted": aborted,
        "interrupted": interrupted,
        "parked": parked,
    }


def park_step(who: RunIdentity, call_ids: list[str]) -> ParkStepOutput:
    """End the hot window: unanswered calls become parked; answered ones are returned for use."""
    rt = services.current()
    rows = [r for r in rt.store.pending.park(who.session_id, who.run_id) if r.tool_call_id in set(call_ids)]
    return {"rows": {r.tool_call_id: pending_row(r) for r in rows}}


def resumed_step(who: RunIdentity, hooks: list[AgentHooks], previous_run_id: str | None) -> ResumedStepOutput:
    """Fire ``on_agent_resumed`` once the answers are in (``previous_run_id`` is the suspended run)."""
    rt = services.current()
    latest = rt.store.get_latest_checkpoint(who.session_id)
    payload = RunPayload(
        who.session_id,
        who.run_id,
        who.agent.name,
        "running",
        previous_run_id=previous_run_id,
        resumed_from_checkpoint_id=None if latest is None else latest.id,
    )
    fire(hooks, "on_agent_resumed", payload, rt.logger)
    return {}


WaitResult = Literal["resolved", "parked", "aborted", "interrupted"]


def await_answers(
    who: RunIdentity,
    call_ids: list[str],
    registration: RegisterStepOutput,
    *,
    hooks: list[AgentHooks],
    resumed_hook: bool,
    previous_run_id: str | None,
) -> tuple[WaitResult, dict[str, PendingRow]]:
    """Workflow code: wait (hot) for every call to be answered or expired, or park.

    Returns the outcome and the rows by call id. Deterministic under replay: every decision reads
    recorded step outputs (including the time each check looked at the clock) and the messages
    ``DBOS.recv`` recorded. A wake-up that carries the answer completing the batch ends the wait
    without a ``hitl.check`` (:func:`rows_with_answer`): the hot path's answer is read once, by the
    submission, and recorded once, by ``recv``.

    The step sequence depends on what the steps recorded, so a run recorded by an older version
    replays the steps it took: a registration without a ``check`` took its first check in its own
    step, a check without ``parked`` never parked (a ``hitl.park`` step follows it), and such a run
    takes ``hitl.resumed`` whenever it has hook sets at all (``hooks``), where a newer one takes it
    only when a hook set defines ``on_agent_resumed`` (``resumed_hook``, from the run's hook plan).
    A registration without ``answers_in_wakes`` takes a check after every wake-up, as such a run
    did whatever the message carried (a submitter of this version sends answers to old runs too).
    """
    agent = who.agent.name
    hot_deadline = int(registration["hot_deadline_ms"])
    check: CheckStepOutput | None = registration.get("check")
    while True:
        if check is None:
            check = DBOS.run_step({"name": step_names.hitl_check(agent)}, check_step, who, call_ids, hot_deadline)
        rows = check["rows"]
        parked = check.get("parked")  # None: recorded before checks could park
        if check["aborted"]:
            return "aborted", rows
        resolved = all(rows[cid]["status"] != "pending" for cid in call_ids)
        if parked:
            if check["interrupted"]:
                return "interrupted", rows
            return ("resolved" if resolved else "parked"), rows  # answers may win the race with parking
        if resolved:
            fire_resumed = resumed_hook if parked is not None else bool(hooks)
            if fire_resumed:
                DBOS.run_step({"name": step_names.hitl_resumed(agent)}, resumed_step, who, hooks, previous_run_id)
            return "resolved", rows
        if check["interrupted"]:
            DBOS.run_step({"name": step_names.hitl_park(agent)}, park_step, who, call_ids)
            return "interrupted", rows
        now = int(check["now_ms"])
        if now >= hot_deadline:
            out: ParkStepOutput = DBOS.run_step({"name": step_names.hitl_park(agent)}, park_step, who, call_ids)
            rows = out["rows"]
            if all(rows[cid]["status"] != "pending" for cid in call_ids):
                return "resolved", rows  # answers won the race with the end of the hot window
            return "parked", rows
        deadlines = [rows[cid]["deadline_ms"] for cid in call_ids if rows[cid]["status"] == "pending"]
        pending_deadlines = [int(d) for d in deadlines if d is not None]
        wake_at = min([hot_deadline, *pending_deadlines])
        message = DBOS.recv(HITL_TOPIC, timeout_seconds=max(0.01, (wake_at - now) / 1000))
        check = None
        answered = rows_with_answer(message, rows, call_ids) if registration.get("answers_in_wakes") else None
        if answered is not None:  # the wake-up carried the last answer: no check step to read it again
            if resumed_hook:
                DBOS.run_step({"name": step_names.hitl_resumed(agent)}, resumed_step, who, hooks, previous_run_id)
            return "resolved", answered


def rows_with_answer(message: object, rows: dict[str, PendingRow], call_ids: list[str]) -> dict[str, PendingRow] | None:
    """The rows with the answer a wake-up carries, when that answer is the batch's last; else ``None``.

    ``rows`` are the last check's (every status but ``pending`` is final). The answer counts only
    for a call of this wait that was still pending there and is the same registration (same run,
    same creation time): a wake-up left over from an earlier batch never answers a later one. An
    answered row is final (the submission's compare-and-set from ``pending`` had one winner), so it
    is the row a check would read; with calls still open, the wait takes a check as before.
    """
    if not isinstance(message, dict):
        return None
    answer: PendingRow | None = message.get("answer")
    if not isinstance(answer, dict) or answer.get("status") != "answered":
        return None
    call_id = answer.get("tool_call_id")
    known = rows.get(call_id) if isinstance(call_id, str) and call_id in call_ids else None
    if (
        known is None
        or known["status"] != "pending"
        or known["run_id"] != answer.get("run_id")
        or known["created_at"] != answer.get("created_at")
    ):
        return None
    merged = {**rows, known["tool_call_id"]: answer}
    if any(merged[cid]["status"] == "pending" for cid in call_ids):
        return None
    return merged


# --- outside the workflow: answers and wake-ups ------------------------------------------------------


def parse_submission(submission: SubmitToolResult | dict[str, Any]) -> SubmitToolResult:
    """A client's answer, validated (``validation_error`` when it is not a submission)."""
    try:
        return SubmitToolResultAdapter.validate_python(submission)
    except ValidationError as exc:
        raise HelixError(f"Invalid tool submission: {exc}", code="validation_error", retryable=False) from exc


def check_submission_fits(parsed: SubmitToolResult, row: PendingToolCall) -> None:
    """Refuse a well-formed answer that does not fit the pending call (``state_conflict``).

    A client-executed call takes a ``client-tool-result``, an approval request an
    ``approval-response`` given for the arguments the call has (when it names a digest).
    """
    expected = "client-tool-result" if row.kind == "client" else "approval-response"
    if parsed.kind != expected:
        what = {"client": "a client-executed tool", "budget": "a budget approval"}.get(row.kind, "an approval request")
        raise HelixError(
            f"Tool call {parsed.tool_call_id!r} is {what}; submit a {expected!r}, not a {parsed.kind!r}",
            code="state_conflict",
            retryable=False,
        )
    if isinstance(parsed, ApprovalResponse) and parsed.arguments_digest not in (None, row.arguments_digest):
        raise HelixError(
            f"The approval for {parsed.tool_call_id!r} was given for different arguments than the call has "
            "(arguments_digest mismatch); nothing was recorded",
            code="state_conflict",
            retryable=False,
        )


def hot_window_seconds() -> float:
    """The configured hot window of this process's runtime."""
    return services.current().hot_window_seconds


__all__ = [
    "DEFAULT_HOT_WINDOW_SECONDS",
    "HITL_TOPIC",
    "WaitResult",
    "await_answers",
    "check_step",
    "check_submission_fits",
    "evaluate_gate_step",
    "hot_window_seconds",
    "needs_approval",
    "park_step",
    "parse_submission",
    "register_step",
    "registration_from_check",
    "resumed_step",
    "rows_with_answer",
    "wake_message",
    "wake_run",
]
