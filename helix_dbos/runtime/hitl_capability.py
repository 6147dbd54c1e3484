"""Human in the loop on the seam: a batch's client-executed and approval-gated calls.

The waiting itself (registration, the hot wait, parking, the checks) is :mod:`helix_dbos.runtime.hitl`;
this module is where a batch of tool calls meets it, at the capability points the tool phases call
(:mod:`helix_dbos.runtime.tools` imports none of it):

- ``calls_left_pending``: a continuation's first check (``{agent}.hitl.check``) of the batch its
  previous run suspended on; the calls registered then stay human-answered whatever their tool
  says now;
- ``gates_call``: a gated tool's call waits for approval (a predicate gate is its own step);
- ``register_calls``: ``{agent}.hitl.register`` (or the continuation's first check standing in for
  it), then ``tool_start`` for each call, ``tool_approval_request`` for each approval and
  ``run_paused``: a client that answers as soon as it sees ``tool_start`` finds its pending call;
- ``collect_answers``: the hot wait or parking, then ``run_resumed``, the calls' wait records
  (:func:`record_waits`) and their answers as results; the approved calls go back to the tool
  phases, which run them as tool steps.

The steps, chunks and their order are those the tool phases took when they did this themselves, so
a run recorded then replays under this module step for step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from helix_dbos.capability import CollectedAnswers, RunCapability
from helix_dbos.observability import run_observer as observe
from helix_dbos.orchestration.message_builder import NOT_APPROVED_MESSAGE
from helix_dbos.orchestration.tool_batch import HitlKind, HitlRequest, ToolBatch
from helix_dbos.runtime import step_names
from helix_dbos.runtime.hitl import await_answers, check_step, needs_approval, register_step, registration_from_check
from helix_dbos.runtime.step_outputs import (
    CheckStepOutput,
    PendingRow,
    RegisterStepOutput,
    ToolStepOutput,
    empty_tool_output,
)
from helix_dbos.runtime.unknown_outcomes import idempotency_key_of, outcome_unknown_output
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.store.base import UsageRecord
from helix_dbos.stream.chunks import RunPausedChunk, RunResumedChunk, ToolApprovalRequestChunk, ToolStartChunk
from helix_dbos.tool import Tool

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext


@dataclass(frozen=True)
class Registered:
    """A batch's human-answered calls, registered: what :meth:`HitlCapability.collect_answers` needs."""

    hitl: list[HitlRequest]
    registration: RegisterStepOutput
    resuming: bool


class HitlCapability(RunCapability):
    """Client-executed and approval-gated calls: registered, awaited (hot, then parked), answered.

    A batch without such calls takes none of its steps. ``first_check`` holds a continuation's first
    check from ``calls_left_pending`` to ``register_calls`` of the same batch (a run's copy, so
    the run's own).
    """

    name = "hitl"

    def __init__(self) -> None:
        self.first_check: CheckStepOutput | None = None

    def calls_left_pending(self, run: RunContext, calls: list[ParsedToolCall]) -> Mapping[str, HitlKind]:
        check: CheckStepOutput = DBOS.run_step(
            {"name": step_names.hitl_check(run.agent.name)},
            check_step,
            run.who,
            [c.id for c in calls],
            continuation=True,
        )
        self.first_check = check
        # A budget call is never one of the transcript's tool calls.
        return {call_id: row["kind"] for call_id, row in check["rows"].items() if row["kind"] != "budget"}

    def gates_call(self, run: RunContext, call: ParsedToolCall, tool: Tool) -> bool:
        return needs_approval(run.agent.name, tool, call, run.who.session_id)

    def register_calls(self, run: RunContext, batch: ToolBatch, *, resuming: bool) -> Registered | None:
        """Register the batch's human-answered calls (one step) and announce them; ``None`` if none.

        A continuation's first check stands in for the registration when it already found the
        batch answered.
        """
        first_check, self.first_check = self.first_check, None
        hitl = batch.hitl
        if not hitl:
            return None
        if resuming and first_check is not None:
            answered = registration_from_check(first_check, [h.call.id for h in hitl])
            if answered is not None:
                return Registered(hitl, answered, resuming)
        registration: RegisterStepOutput = DBOS.run_step(
            {"name": step_names.hitl_register(run.agent.name)},
            register_step,
            run.who,
            hitl,
            run.rt.hot_window_seconds,
            run.hooks,
            not resuming,
        )
        if not resuming:
            _announce(run, hitl, registration)
        return Registered(hitl, registration, resuming)

    def collect_answers(self, run: RunContext, registered: object, results: dict[str, Any]) -> CollectedAnswers:
        """Wait for the answers and turn them into results; the approved calls come back to run.

        Stops the batch when the answers did not all come (parked, aborted, interrupted).
        """
        assert isinstance(registered, Registered)
        hitl, resuming = registered.hitl, registered.resuming
        previous = run.request.previous_run_id if resuming else run.who.run_id
        call_ids = [h.call.id for h in hitl]
        with observe.current().hitl_wait(call_ids, continuation=resuming) as waiting:
            wait, rows = await_answers(
                run.who,
                call_ids,
                registered.registration,
                hooks=run.hooks,
                resumed_hook=run.wants("on_agent_resumed"),
                previous_run_id=previous,
            )
            waiting.done(wait)
        if wait != "resolved":
            stop = "suspended" if wait == "parked" else wait
            return CollectedAnswers(stop=stop, pending_ids=[cid for cid in call_ids if cid not in results])
        run.emit(RunResumedChunk(**run.chunk_base(), run_id=run.who.run_id, previous_run_id=previous))
        record_waits(run, [(h.tool.name, rows[h.call.id]) for h in hitl])
        approved = _answers_to_results(hitl, rows, results, lambda call: idempotency_key_of(run, call))
        run.applied_pending.extend(call_ids)  # committed with the step that records the results
        return CollectedAnswers(run_as_steps=approved)


def record_waits(run: RunContext, answered: list[tuple[str, PendingRow]]) -> None:
    """One ``client_tool_wait_ms`` record per answered (or timed-out) human call.

    The value is the time from its durable registration to its durable answer (the seeds'
    ``CLIENT_TOOL_WAIT_MS``), parks included. From the recorded rows, so a replay records the same values.
    """
    for name, row in answered:
        if row["answered_at"] is None:
            continue
        waited = float(max(0, int(row["answered_at"]) - int(row["created_at"])))
        success = row["status"] != "expired"
        run.pending_usage.append(
            UsageRecord(kind="client_tool_wait_ms", name=name, step=run.step, value=waited, success=success)
        )


def _announce(run: RunContext, hitl: list[HitlRequest], registration: RegisterStepOutput) -> None:
    """``tool_start`` (and ``tool_approval_request``) per call, then ``run_paused``: after the registration."""
    for h in hitl:
        arguments = h.call.arguments if isinstance(h.call.arguments, dict) else {}
        if h.kind != "rerun":  # a re-run's call was announced when it first started
            run.emit(
                ToolStartChunk(**run.chunk_base(), tool_call_id=h.call.id, tool_name=h.call.name, arguments=arguments)
            )
        if h.kind in ("approval", "rerun"):
            run.emit(
                ToolApprovalRequestChunk(
                    **run.chunk_base(),
                    tool_call_id=h.call.id,
                    tool_name=h.tool.name,
                    arguments=arguments,
                    arguments_digest=registration["digests"][h.call.id],
                    deadline=registration["deadlines"].get(h.call.id),
                )
            )
    run.emit(
        RunPausedChunk(
            **run.chunk_base(), reason="awaiting_tool_results", pending_tool_call_ids=[h.call.id for h in hitl]
        )
    )


def _answers_to_results(
    hitl: list[HitlRequest],
    rows: dict[str, PendingRow],
    results: dict[str, Any],
    key_of: Callable[[ParsedToolCall], str],
) -> list[tuple[ParsedToolCall, Tool]]:
    """Turn recorded answers into tool results; returns the approved calls, which must now run.

    An approved call that carries its ``held_result`` (a result a person was asked about) gets that
    result instead: it ran before the question was put, and never runs twice.

    A denied ``rerun`` keeps the call's "outcome unknown" result (``key_of`` gives its idempotency key).
    """
    approved: list[tuple[ParsedToolCall, Tool]] = []
    for h in hitl:
        row = rows[h.call.id]
        submission = row.get("submission") or {}
        if row["status"] == "expired":
            waited = f" after {h.tool.timeout_ms} ms" if h.tool.timeout_ms else ""
            who = "the client" if h.kind == "client" else "approval"
            results[h.call.id] = _error(h.call, f"Tool call timed out waiting for {who}{waited}")
        elif h.kind == "client":
            results[h.call.id] = _client_result(h.call, submission)
        elif submission.get("approved") and submission.get("arguments_digest") in (None, row["arguments_digest"]):
            if h.held_result is not None:  # the person approved a result: the call ran already
                results[h.call.id] = h.held_result
            else:
                approved.append((h.call, h.tool))
        elif h.kind == "rerun":
            results[h.call.id] = outcome_unknown_output(h.call, h.tool.name, key_of(h.call))
        else:
            results[h.call.id] = {**_error(h.call, NOT_APPROVED_MESSAGE), "after_tool": False}
    return approved


def _client_result(call: ParsedToolCall, submission: dict[str, Any]) -> ToolStepOutput:
    """The result a client submitted for a client-executed tool."""
    if submission.get("error"):
        return _error(call, str(submission["error"]))
    return {**_error(call, None), "success": True, "result": submission.get("result")}


def _error(call: ParsedToolCall, error: str | None) -> ToolStepOutput:
    """A failed result no step ran for (the tool phases' ``error_result``, same shape)."""
    return {**empty_tool_output(call.id, call.name), "error": error}


__all__ = ["HitlCapability", "Registered", "record_waits"]
