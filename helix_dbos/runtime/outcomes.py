"""Waiting for a run's outcome from any process, and turning it into an ``AgentResult``.

A run publishes its outcome as a DBOS event (``helix.outcome``) from its last step; a waiter in any
process wakes on it (LISTEN/NOTIFY on PostgreSQL). A workflow can also end *without* publishing
one (cancelled by an abort, or failed outside the loop): then DBOS's own workflow status says how
it ended, and the store says why.
"""

from __future__ import annotations

import time
from typing import Any

from dbos import DBOS, WorkflowStatus
from pydantic import TypeAdapter

from helix_dbos.agent import AgentConfig
from helix_dbos.errors import RunNotFinishedError, public_error_message
from helix_dbos.runtime.run_request import OUTCOME_EVENT
from helix_dbos.session import AgentResult
from helix_dbos.store.base import SessionStore

_STILL_RUNNING = ("PENDING", "ENQUEUED", "DELAYED")
_POLL_SECONDS = 5.0
"""How long one wait on the event lasts before DBOS's workflow status is checked again."""


def await_outcome(store: SessionStore, workflow_id: str, timeout_seconds: float | None) -> dict[str, Any]:
    """The run's outcome (``status``, ``output``, ``error``, ...), waiting up to ``timeout_seconds``.

    Raises :class:`RunNotFinishedError` when the time runs out first.
    """
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    while True:
        wait = _POLL_SECONDS if deadline is None else max(0.0, min(_POLL_SECONDS, deadline - time.monotonic()))
        outcome = DBOS.get_event(workflow_id, OUTCOME_EVENT, timeout_seconds=wait)
        if outcome is not None:
            return dict(outcome)
        status = DBOS.get_workflow_status(workflow_id)
        if status is not None and status.status not in _STILL_RUNNING:
            if status.status == "SUCCESS":
                return dict(DBOS.retrieve_workflow(workflow_id).get_result())
            return {"status": "failed", "output": None, "error": _ended_without_outcome(store, workflow_id, status)}
        if deadline is not None and time.monotonic() >= deadline:
            raise RunNotFinishedError(workflow_id, timeout_seconds or 0.0)


def _ended_without_outcome(store: SessionStore, workflow_id: str, status: WorkflowStatus) -> str:
    """Why a run's workflow ended without publishing its outcome: aborted (with the reason), or failed."""
    run = store.get_run(workflow_id)
    session = store.load_session(run.session_id) if run is not None else None
    if session is not None and session.aborted and session.run_id == workflow_id:
        return session.error or (f"aborted: {session.abort_reason}" if session.abort_reason else "aborted")
    return public_error_message(f"workflow {status.status}: {status.error}" if status.error else status.status)


def to_result(agent: AgentConfig | None, outcome: dict[str, Any]) -> AgentResult:
    """The caller's view of an outcome: the output validated into the agent's output schema."""
    if outcome["status"] == "suspended_client_tool":
        ids = outcome.get("pending_tool_call_ids") or []
        return AgentResult(status="suspended_client_tool", suspended={"tool_call_ids": ids})
    if outcome["status"] == "suspended_awaiting_children":
        return AgentResult(status="suspended_awaiting_children", suspended={"children": outcome.get("children") or []})
    output = outcome.get("output")
    if output is not None and agent is not None and agent.output_schema is not None:
        output = TypeAdapter(agent.output_schema).validate_python(output)
    return AgentResult(status=outcome["status"], output=output, error=outcome.get("error"))


__all__ = ["await_outcome", "to_result"]
