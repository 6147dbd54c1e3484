"""Budgets in the workflow: check between steps, suspend for an approval, go on or fail.

Only runs whose request carries a budget (the agent's, fixed when the run started) take any of
this, so runs of other agents record exactly the steps they always did.

- ``{agent}.budget.start`` (once per run): for ``scope="session"`` the session's billed spend so far
  and the limits earlier approvals raised; and whether the previous run suspended on a ``budget``
  call still to be answered (a continuation picks it up, like a suspended tool batch).
- Between steps the loop adds the run's own recorded usage and asks the pure
  :func:`~helix_dbos.orchestration.budget.budget_crossing`.
- A crossing registers a pending call of kind ``budget`` (``{agent}.budget.register``), announces it
  as a ``tool_approval_request`` with ``tool_name="budget"``, and waits for it with the same hot
  window, parking and wake-ups as tool approvals (:func:`~helix_dbos.runtime.hitl.await_answers`).
  So the answer is exactly-once (a compare-and-set on the row) and fail-closed: only an explicit
  approval whose digest, if given, matches the request lets the run go on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dbos import DBOS

from helix_dbos.agent import AgentHooks
from helix_dbos.capability import RunCapability, RunEnd
from helix_dbos.orchestration.budget import (
    BudgetCrossing,
    BudgetLimits,
    Spend,
    budget_crossing,
    initial_limits,
    raised_limits,
)
from helix_dbos.runtime import services, step_names
from helix_dbos.runtime.hitl import await_answers, check_step
from helix_dbos.runtime.hitl_capability import record_waits
from helix_dbos.runtime.hooks import RunPayload, fire
from helix_dbos.runtime.ids import RECORDED_STOP_REASON_PATCH
from helix_dbos.runtime.run_request import RunIdentity
from helix_dbos.runtime.step_outputs import BudgetStartStepOutput, PendingRow, RegisterStepOutput
from helix_dbos.store.base import PendingToolCall
from helix_dbos.store.engine import now_ms
from helix_dbos.stream.chunks import (
    ErrorChunk,
    RunPausedChunk,
    RunResumedChunk,
    ToolApprovalRequestChunk,
    canonical_arguments_digest,
)
from helix_dbos.usage import Budget, UsageRecordLike, summarize_usage

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext

__all__ = [
    "BUDGET_TOOL_NAME",
    "BudgetAnswer",
    "BudgetCapability",
    "BudgetOutcome",
    "BudgetTracker",
    "budget_call_id",
]

BUDGET_TOOL_NAME = "budget"
"""The ``tool_name`` of a budget approval in pending calls and ``tool_approval_request`` chunks."""

BudgetOutcome = Literal["approved", "denied", "suspended", "aborted", "interrupted"]


@dataclass(frozen=True)
class BudgetAnswer:
    """How a budget approval ended: ``outcome``, the pending call's id, and the error when denied."""

    outcome: BudgetOutcome
    call_id: str
    error: str | None = None


def budget_call_id(run_id: str, step: int) -> str:
    """The pending call of a crossing after ``step`` of a run (one check per step boundary)."""
    return f"budget:{run_id}:{step}"


def _spend(records: Iterable[UsageRecordLike]) -> Spend:
    summary = summarize_usage(records)
    return Spend(tokens=summary.billed_tokens, cost_usd=summary.billed_cost_usd)


def budget_start_step(who: RunIdentity, scope: str, previous_run_id: str | None) -> BudgetStartStepOutput:
    """Read what a budgeted run starts from (see the module docstring); recorded, so replay agrees."""
    store = services.current().store
    spent = Spend()
    raise_to: dict[str, float] = {}
    budget_rows = [r for r in store.pending.get(who.session_id) if r.kind == "budget"]
    if scope == "session":
        spent = _spend(store.get_usage(who.session_id))
        for row in budget_rows:
            submission = row.submission or {}
            if row.status in ("answered", "applied") and submission.get("approved") is True:
                for name, value in (row.arguments.get("raise_to") or {}).items():
                    raise_to[name] = max(float(value), raise_to.get(name, 0.0))
    open_call = next(
        (r for r in budget_rows if r.run_id == previous_run_id and r.status in ("pending", "answered")), None
    )
    return {
        "spent_tokens": spent.tokens,
        "spent_cost_usd": spent.cost_usd,
        "raise_to": raise_to,
        "open_call": None if open_call is None else _row(open_call),
    }


def budget_register_step(
    who: RunIdentity,
    call_id: str,
    arguments: dict[str, object],
    hot_window_seconds: float,
    hooks: list[AgentHooks],
    announce: bool,
) -> RegisterStepOutput:
    """Record the crossing as a pending ``budget`` call (idempotent) and take the first check."""
    rt = services.current()
    now = now_ms()
    digest = canonical_arguments_digest(arguments)
    row = PendingToolCall(
        session_id=who.session_id,
        tool_call_id=call_id,
        run_id=who.run_id,
        workflow_id=who.workflow_id,
        tool_name=BUDGET_TOOL_NAME,
        kind="budget",
        arguments=dict(arguments),
        arguments_digest=digest,
        created_at=now,
    )
    rt.store.pending.register([row])
    if announce:
        payload = RunPayload(
            who.session_id,
            who.run_id,
            who.agent.name,
            "suspended_client_tool",
            extra={"tool_call_ids": [call_id], "reason": "budget"},
        )
        fire(hooks, "on_agent_suspended", payload, rt.logger)
    first = check_step(who, [call_id])
    return {
        "hot_deadline_ms": now + int(hot_window_seconds * 1000),
        "deadlines": {call_id: None},
        "digests": {cid: r["arguments_digest"] for cid, r in first["rows"].items()},
        "check": first,
        "answers_in_wakes": True,
    }


def _row(row: PendingToolCall) -> PendingRow:
    dumped: PendingRow = row.model_dump(mode="json")  # type: ignore[assignment]
    return dumped


@dataclass
class BudgetTracker:
    """A budgeted run's limits and the spend it started from (workflow memory, rebuilt on replay)."""

    budget: Budget
    limits: BudgetLimits
    baseline: Spend
    open_call: PendingRow | None

    @classmethod
    def start(cls, run: RunContext) -> BudgetTracker | None:
        """The tracker of a run whose request has a budget (one recorded step), else ``None``."""
        budget = run.request.budget
        if budget is None:
            return None
        out: BudgetStartStepOutput = DBOS.run_step(
            {"name": step_names.budget_start(run.agent.name)},
            budget_start_step,
            run.who,
            budget.scope,
            run.request.previous_run_id if run.request.mode == "resume" else None,
        )
        limits = raised_limits(initial_limits(budget), out["raise_to"])
        baseline = Spend(int(out["spent_tokens"]), float(out["spent_cost_usd"]))
        return cls(budget=budget, limits=limits, baseline=baseline, open_call=out["open_call"])

    def crossing(self, run: RunContext) -> BudgetCrossing | None:
        """Pure, from recorded usage: the baseline plus every record of this run so far."""
        spent = self.baseline + _spend([*run.usage_log, *run.pending_usage])
        return budget_crossing(self.budget, self.limits, spent)

    def ask(self, run: RunContext, crossing: BudgetCrossing) -> BudgetAnswer:
        """Suspend for an approval of ``crossing``; returns the outcome and, when denied, the error."""
        call_id = budget_call_id(run.who.run_id, run.step)
        return self._await(run, call_id, crossing.arguments(), announce=True, raise_here=True)

    def answer_open_call(self, run: RunContext) -> BudgetAnswer | None:
        """A continuation first waits for the budget call its previous run suspended on, if any."""
        row, self.open_call = self.open_call, None
        if row is None:
            return None
        # A run-scoped budget starts from zero in the new run anyway: that is the raise.
        return self._await(
            run, row["tool_call_id"], row["arguments"], announce=False, raise_here=self.budget.scope == "session"
        )

    def _await(
        self, run: RunContext, call_id: str, arguments: dict[str, object], *, announce: bool, raise_here: bool
    ) -> BudgetAnswer:
        agent = run.agent.name
        registration: RegisterStepOutput = DBOS.run_step(
            {"name": step_names.budget_register(agent)},
            budget_register_step,
            run.who,
            call_id,
            arguments,
            run.rt.hot_window_seconds,
            run.hooks,
            announce,
        )
        if announce:
            run.emit(
                ToolApprovalRequestChunk(
                    **run.chunk_base(),
                    tool_call_id=call_id,
                    tool_name=BUDGET_TOOL_NAME,
                    arguments=dict(arguments),
                    arguments_digest=registration["digests"][call_id],
                    deadline=None,
                )
            )
            run.emit(RunPausedChunk(**run.chunk_base(), reason="budget_exceeded", pending_tool_call_ids=[call_id]))
        previous = run.who.run_id if announce else run.request.previous_run_id
        wait, rows = await_answers(
            run.who,
            [call_id],
            registration,
            hooks=run.hooks,
            resumed_hook=run.wants("on_agent_resumed"),
            previous_run_id=previous,
        )
        if wait == "parked":
            return BudgetAnswer("suspended", call_id)
        if wait != "resolved":
            return BudgetAnswer(wait, call_id)
        row = rows[call_id]
        run.emit(RunResumedChunk(**run.chunk_base(), run_id=run.who.run_id, previous_run_id=previous))
        record_waits(run, [(BUDGET_TOOL_NAME, row)])
        run.applied_pending.append(call_id)
        submission = row.get("submission") or {}
        if submission.get("approved") is True and submission.get("arguments_digest") in (None, row["arguments_digest"]):
            if raise_here:
                self.limits = raised_limits(self.limits, dict(row["arguments"].get("raise_to") or {}))
            return BudgetAnswer("approved", call_id)
        reason = submission.get("reason")
        limits = _describe(row["arguments"])
        error = f"Budget exceeded ({limits}) and more spending was not approved" + (f": {reason}" if reason else "")
        return BudgetAnswer("denied", call_id, error)


class BudgetCapability(RunCapability):
    """Budgets on the seam: a budgeted run checks its spend between steps and asks for more past a limit.

    A run whose request has no budget takes none of its steps (``on_start`` leaves no tracker).
    """

    name = "budget"
    replay_patches = (RECORDED_STOP_REASON_PATCH,)

    def __init__(self) -> None:
        self.tracker: BudgetTracker | None = None

    def on_start(self, run: RunContext) -> RunEnd | None:
        self.tracker = BudgetTracker.start(run)
        return None

    def after_outstanding(self, run: RunContext) -> RunEnd | None:
        if self.tracker is None:
            return None
        return _end_for(run, self.tracker.answer_open_call(run))

    def between_steps(self, run: RunContext) -> RunEnd | None:
        if self.tracker is None:
            return None
        crossing = self.tracker.crossing(run)
        if crossing is None:
            return None
        run.rt.logger.info(
            f"[helix-dbos] {crossing.message()}; waiting for approval", {"run_id": run.who.run_id, "step": run.step}
        )
        return _end_for(run, self.tracker.ask(run, crossing))


def _end_for(run: RunContext, answer: BudgetAnswer | None) -> RunEnd | None:
    """How a budget answer ends the run: suspended (parked), failed (denied), stopped; ``None``: go on."""
    if answer is None or answer.outcome == "approved":
        return None
    if answer.outcome == "suspended":
        return RunEnd("suspended_client_tool", pending_ids=[answer.call_id])
    if answer.outcome == "interrupted":
        return RunEnd("interrupted", reason="interrupted while waiting for a budget approval")
    if answer.outcome == "aborted":
        return RunEnd("failed", error=run.abort_error())
    message = answer.error or "Budget exceeded and more spending was not approved"
    run.emit(ErrorChunk(**run.chunk_base(), error=message, recoverable=False))
    return RunEnd("failed", error=message)


def _describe(arguments: dict[str, object]) -> str:
    exceeded = arguments.get("exceeded")
    if not isinstance(exceeded, dict):
        return "limit reached"
    parts = []
    for name, info in exceeded.items():
        if isinstance(info, dict):
            parts.append(f"{name} {info.get('limit')}, used {info.get('used')}")
    scope = arguments.get("scope", "run")
    return f"{scope} " + "; ".join(parts)
