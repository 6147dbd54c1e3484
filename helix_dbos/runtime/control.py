"""``RunController``: answer a run's pending tool calls, interrupt it, abort it.

Each of these is a durable store write first, then a wake-up of the run where it waits (a DBOS
message to its workflow) and the same for its children (:mod:`.children`). None of them runs a
workflow here: a parked run's continuation is started through the start protocol
(:mod:`.starting`), which enqueues it when the client has a run queue.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from helix_dbos._clock import now_ms
from helix_dbos.errors import AgentNotResumableError, HelixError, WakeUpRefusedError
from helix_dbos.observability import lifecycle
from helix_dbos.runtime import children
from helix_dbos.runtime.backend import Backend
from helix_dbos.runtime.client_tool_log import log_call_event
from helix_dbos.runtime.handle import AgentExecutionHandle
from helix_dbos.runtime.hitl import check_submission_fits, parse_submission, wake_run
from helix_dbos.runtime.reads import RunReads
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.wake import TransactionalWaker
from helix_dbos.session import ApprovalResponse, SubmitToolResult
from helix_dbos.store.base import PendingToolCall, SubmitOutcome
from helix_dbos.validation import check_text

if TYPE_CHECKING:
    from helix_dbos.runtime.starting import HandleFactory

__all__ = ["ContinueParked", "RunController"]

ContinueParked = Callable[[str, SubmitOutcome | None], AgentExecutionHandle | None]
"""Starts the continuation of a parked run whose batch an answer completed (the facade's)."""


class RunController:
    """Submissions, interrupts and aborts of runs, from any process."""

    def __init__(
        self,
        services: RuntimeServices,
        backend: Backend,
        reads: RunReads,
        handle: HandleFactory,
        continue_parked: ContinueParked,
        *,
        waker: TransactionalWaker | None = None,
    ) -> None:
        self._services = services
        self._store = services.store
        self._logger = services.logger
        self._backend = backend
        self._reads = reads
        self._handle = handle
        self._continue_parked = continue_parked
        self.waker = waker
        """Sends a hot run's wake-up in the submission's transaction; dropped once the database refuses one."""

    def get_handle(self, session_id: str) -> AgentExecutionHandle | None:
        """A handle on the session's current (latest) run, with the per-call hooks this process knows."""
        run = self._store.get_current_run(session_id)
        session = self._store.load_session(session_id)
        if run is None or session is None:
            return None
        return self._handle(run, session.agent_type, self._services.call_hooks_of(run.workflow_id))

    # -- human in the loop ----------------------------------------------------------------------------
    def submit_tool_result(
        self, session_id: str, submission: SubmitToolResult | dict[str, Any]
    ) -> AgentExecutionHandle | None:
        """Record an answer exactly once, then wake the hot run or continue the parked one."""
        check_text(session_id=session_id, submission=submission)
        try:
            parsed = parse_submission(submission)
        except HelixError as exc:
            call_id = submission.get("tool_call_id") if isinstance(submission, dict) else None
            lifecycle.log_event(
                "client_tool.validation_failed",
                session_id,
                None,
                logging.WARNING,
                tool_call_id=call_id if isinstance(call_id, str) else None,
                code=exc.code,
                error=str(exc),
            )
            raise
        session_id = self._owner_of(session_id, parsed.tool_call_id)
        misfit: list[tuple[PendingToolCall, HelixError]] = []

        def fits(row: PendingToolCall) -> None:
            try:
                check_submission_fits(parsed, row)
            except HelixError as exc:
                misfit[:] = [(row, exc)]
                raise

        try:
            outcome, woken = self._record_answer(session_id, parsed.tool_call_id, parsed.model_dump(mode="json"), fits)
        except HelixError as exc:
            if misfit and misfit[0][1] is exc:  # logged once the refusal is final, not per attempt
                row = misfit[0][0]
                log_call_event("validation_failed", row, logging.WARNING, code=exc.code, error=str(exc))
            raise
        call = outcome.call
        log_call_event(
            "submitted",
            call,
            kind=parsed.kind,
            delivery=outcome.delivery,
            wait_ms=None if call.answered_at is None else max(0, call.answered_at - call.created_at),
            approved=parsed.approved if isinstance(parsed, ApprovalResponse) else None,
        )
        if outcome.delivery == "hot":
            if not woken:
                wake_run(outcome.call.workflow_id, parsed.tool_call_id, self._logger, outcome.call)
            return self._hot_handle(outcome)
        if outcome.batch_complete:
            return self._continue_parked(session_id, outcome)
        return None

    def _owner_of(self, session_id: str, tool_call_id: str) -> str:
        """The session that owns the call in ``session_id``'s tree (the root's, or a sub-agent's), else ``session_id``.

        Submissions go against the root session (the seeds' contract); the call's row says which
        session of the tree asked for it. A call no session of the tree holds is looked up in
        ``session_id`` itself, which refuses it as not found: never in another tree.
        """
        owner = self._store.pending.owner_in_tree(session_id, tool_call_id)
        if owner is None or owner == session_id:
            return session_id
        lifecycle.log_event(
            "client_tool.ownership_routed",
            owner,
            None,
            tool_call_id=tool_call_id,
            root_session_id=session_id,
            owner_session_id=owner,
        )
        return owner

    def _record_answer(
        self, session_id: str, tool_call_id: str, payload: dict[str, Any], fits: Callable[[PendingToolCall], None]
    ) -> tuple[SubmitOutcome, bool]:
        """The store's submission, with a hot run's wake-up in its transaction where it can be.

        Returns the outcome and whether a hot run was woken (else the caller sends the wake-up). A
        wake-up the database refuses rolled the whole transaction back, so the answer is recorded
        again without it; the client then stops waking in submissions (DBOS's tables are not in
        the store's database after all).
        """
        waker, joint = self.waker, self._backend.transactional_submit
        if waker is not None and joint is not None:
            try:
                outcome = joint.submit_with(session_id, tool_call_id, payload, fits, waker)
                return outcome, outcome.delivery == "hot"
            except WakeUpRefusedError as refused:
                self.waker = None
                self._logger.warn(
                    "[helix-dbos] wake-up refused in the submission's transaction; "
                    "waking runs with DBOS.send from now on",
                    {"workflow_id": refused.workflow_id, "error": repr(refused.__cause__)},
                )
        return self._store.pending.submit(session_id, tool_call_id, payload, fits), False

    def _hot_handle(self, outcome: SubmitOutcome) -> AgentExecutionHandle | None:
        """A handle on the woken run, from what the submission's transaction read (or a fresh read)."""
        run = outcome.run if outcome.run is not None else self._store.get_run(outcome.call.run_id)
        session = outcome.session if outcome.session is not None else self._store.load_session(outcome.call.session_id)
        if run is None or session is None:
            return None
        return self._handle(run, session.agent_type, self._services.call_hooks_of(run.workflow_id))

    # -- run control -------------------------------------------------------------------------------------
    def interrupt(self, session_id: str, reason: str | None = None) -> bool:
        """Set the durable interrupt flag, wake the run and interrupt its children; False when none is in flight."""
        check_text(session_id=session_id, reason=reason)
        self._reads.require_session(session_id)
        requested = self._store.request_interrupt(session_id, reason, now_ms=now_ms())
        if requested:
            self._trip_tool_signals(session_id, f"interrupted: {reason}" if reason else "interrupted")
            run = self._store.get_current_run(session_id)
            if run is not None and run.status == "running":
                wake_run(run.workflow_id, "interrupt", self._logger)
            for ref in children.running_children(self._store, session_id):  # the cascade (see .children)
                children.interrupt_child(self._services, ref.sub_session_id, reason or "parent interrupted")
        return requested

    def abort(self, session_id: str, reason: str | None = None) -> None:
        """Fail the run in the store, cancel its open calls, wake and cancel its workflow, stop its children."""
        check_text(session_id=session_id, reason=reason)
        session = self._reads.require_session(session_id)
        run = self._store.get_current_run(session_id)
        if session.status != "active" or run is None:
            raise AgentNotResumableError(session_id, session.status, "no run in flight to abort")
        error = f"aborted: {reason}" if reason else "aborted"
        self._store.finish_run(
            session_id,
            run.run_id,
            session_status="failed",
            run_status="failed",
            error=error,
            aborted=True,
            abort_reason=reason,
            now_ms=now_ms(),
        )
        cancelled = self._store.pending.cancel_open(session_id)
        for call in self._store.pending.get(session_id, cancelled) if cancelled else []:
            log_call_event("aborted", call, reason=reason)
        self._trip_tool_signals(session_id, error)
        wake_run(run.workflow_id, "abort", self._logger)
        with contextlib.suppress(Exception):
            if DBOS.get_workflow_status(run.workflow_id) is not None:
                DBOS.cancel_workflow(run.workflow_id)
        for ref in children.running_children(self._store, session_id):  # the cascade (see .children)
            children.stop_child(self._services, ref.sub_session_id, f"parent {error}")
        self._services.streams.fail(session.stream_id, error)
        if session.parent_session_id is not None and self._services.parent_waker is not None:
            self._services.parent_waker.wake(session.parent_session_id)  # a child ended without its finalize

    def _trip_tool_signals(self, session_id: str, reason: str) -> None:
        """Trip the abort signals of the session's tools running here (others see the durable flag)."""
        if self._services.abort_signals is not None:
            self._services.abort_signals.trip(session_id, reason)
