"""Stopping and interrupting a child run tree: from a parent's step, or from outside workflows.

A parent's wait stops its child on a timeout or its own abort and passes an interrupt on
(:func:`~.children.wait_child_step`); a companion's ``terminate`` stops one; the executor's abort
and interrupt cascade to every running child. Each reads and writes the store and wakes the child's
run, so it needs no workflow context, and nothing here imports the steps or the loop.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from dbos import DBOS

from helix_dbos._clock import now_ms
from helix_dbos.runtime.hitl_wake import wake_run
from helix_dbos.session import SubSessionRef
from helix_dbos.store.base import SessionStore

if TYPE_CHECKING:
    from helix_dbos.runtime.services import RuntimeServices


def timeout_error(timeout_ms: int | None) -> str:
    """The error a child stopped at its deadline ends with (its parent's result says ``timeout``)."""
    return f"the child run did not finish within {timeout_ms} ms; it was stopped"


def stop_child(rt: RuntimeServices, session_id: str, error: str) -> None:
    """Stop a child run and its own running children: session ``failed`` (aborted), workflow cancelled.

    What ``DBOSAgentExecutor.abort`` does, callable from a step (a timeout, a parent's abort). A
    child that already ended is left as it is.
    """
    store = rt.store
    session = store.load_session(session_id)
    run = store.get_current_run(session_id)
    if session is not None and run is not None and session.status == "active":
        store.finish_run(
            session_id,
            run.run_id,
            session_status="failed",
            run_status="failed",
            error=error,
            aborted=True,
            abort_reason=error,
            now_ms=now_ms(),
        )
        store.pending.cancel_open(session_id)
        if rt.abort_signals is not None:
            rt.abort_signals.trip(session_id, error)
        wake_run(run.workflow_id, "abort", rt.logger)
        with contextlib.suppress(Exception):
            if DBOS.get_workflow_status(run.workflow_id) is not None:
                DBOS.cancel_workflow(run.workflow_id)
        rt.streams.fail(session.stream_id, error)
    for ref in store.get_sub_session_refs(session_id):
        if ref.status == "running":
            stop_child(rt, ref.sub_session_id, error)


def interrupt_child(rt: RuntimeServices, session_id: str, reason: str) -> None:
    """Pass an interrupt on to a child run (and its running children); it ends ``interrupted``."""
    store = rt.store
    if store.request_interrupt(session_id, reason, now_ms=now_ms()):
        if rt.abort_signals is not None:
            rt.abort_signals.trip(session_id, reason)
        run = store.get_current_run(session_id)
        if run is not None and run.status == "running":
            wake_run(run.workflow_id, "interrupt", rt.logger)
    for ref in store.get_sub_session_refs(session_id):
        if ref.status == "running":
            interrupt_child(rt, ref.sub_session_id, reason)


def running_children(store: SessionStore, session_id: str) -> list[SubSessionRef]:
    """The session's children whose runs have not ended (as the parent recorded them)."""
    return [ref for ref in store.get_sub_session_refs(session_id) if ref.status == "running"]


__all__ = ["interrupt_child", "running_children", "stop_child", "timeout_error"]
