"""A parent waiting on sub-agent children holds no thread: it parks after the hot window.

A run is a sync DBOS workflow and holds an executor thread from start to end, so a parent that
waited for its sub-agent for the child's whole run held a thread doing nothing: a thousand parents
of long children, a thousand threads. Human waits already bound that with the hot window (wait
``hot_window_seconds`` in ``DBOS.recv``, then park); children now do the same, with the machinery
a parent whose blocking companion waits on a human already uses (:mod:`.companions`):

1. **Park.** The parent waits for each of its batch's children at most until the hot window, counted
   from the child's recorded start, has passed (:func:`~.children.wait_child_hot_step`). A child still
   running then (or parked itself) has no result yet: its call stays open, a
   :class:`~helix_dbos.session.SuspendedChildWait` goes to ``run.awaiting_children``, and the run
   ends ``suspended_awaiting_children``. Its workflow ends: no thread. The child's ref stays ``running``.
2. **Wake.** A child's finalize step (its session has ended: completed, failed, interrupted) asks
   :class:`ParentWaker` to continue its parent; so does a parent's own finalize as it parks, for a
   child that ended while it was parking. The waker starts the continuation only when none of the
   parent's parked children is still active, on a small thread pool, outside the step (DBOS refuses
   ``start_workflow`` inside a step). The start is the one parked runs use
   (``DBOSAgentExecutor._continue_parked``): a compare-and-set on the session's version under the
   next turn's deterministic run id, so of the waker, a second waker and the sweep exactly one starts
   it. The workers' sweep (:func:`~.workers.expire_parked_calls`) is the safety net for a process
   that died between the child's end and the wake; a child stopped from outside (its deadline, an
   operator's abort) ends without a finalize, and whoever stops it wakes the parent.
3. **Continue.** The continuation answers the open calls (``_answer_outstanding``): a step
   (``{agent}.child.awaited``, :func:`awaited_children_step`) finds the child each open sub-agent
   call started (its ref), and the call awaits that child instead of starting another. The child has
   ended, so the wait returns at once with the outcome a parent waiting hot would have got, and the
   call's result message is the same (a ``timeout`` is judged against the deadline the open recorded,
   so a child that ended before its deadline keeps its own end).

What a run records changes (the wait may end ``running``; a continuation takes ``{agent}.child.awaited``),
so it is behind :data:`CHILD_PARK_PATCH`, asked once per run at its first wait on a sub-agent: a run
recorded before waits hot, as it did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from helix_dbos.runtime import services, step_names
from helix_dbos.runtime.run_request import RunIdentity, RunRequest
from helix_dbos.runtime.step_outputs import ChildStartOutput
from helix_dbos.store.base import SessionRecord, SessionStore

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext

CHILD_PARK_PATCH = "helix-park-on-sub-agents"
"""Replay patch: a parent waits for a sub-agent child at most the hot window, then parks as
``suspended_awaiting_children``; its continuation finds the child (``{agent}.child.awaited``)."""

_log = logging.getLogger("helix_dbos.runtime.child_park")

_WAKE_THREADS = 8
"""Wakes run at once at most: a wake is I/O (two reads, a run's start), so a burst of children
ending together (a fan-out's) queues behind few threads; a thread per parent is what parking removes."""


def parking_enabled(run: RunContext) -> bool:
    """Whether this run's sub-agent waits are bounded by the hot window (the patch, asked once per run)."""
    if run.child_park_patched is None:
        run.child_park_patched = DBOS.patch(CHILD_PARK_PATCH)
    return run.child_park_patched


def awaited_children(run: RunContext, calls: list[tuple[str, int | None]]) -> dict[str, ChildStartOutput]:
    """A continuation's open sub-agent calls (id, the tool's timeout) and the child each one started.

    Only a run whose previous run parked on a child has open sub-agent calls: before this change a
    batch always had their results, so older recordings never reach this step.
    """
    if not calls or not parking_enabled(run):
        return {}
    found: dict[str, ChildStartOutput] = DBOS.run_step(
        {"name": step_names.child_awaited(run.agent.name)}, awaited_children_step, run.who, calls
    )
    return found


def awaited_children_step(parent: RunIdentity, calls: list[tuple[str, int | None]]) -> dict[str, ChildStartOutput]:
    """``{agent}.child.awaited``: the ephemeral child each open call started, as its open recorded it.

    The ref the open wrote names the call and the child's start; the child's deadline is that start
    plus the tool's timeout, which is what the open recorded (``ChildStartOutput.deadline_ms``).
    """
    rt = services.current()
    refs = {r.parent_tool_call_id: r for r in rt.store.get_sub_session_refs(parent.session_id) if r.mode == "ephemeral"}
    found: dict[str, ChildStartOutput] = {}
    for call_id, timeout_ms in calls:
        ref = refs.get(call_id)
        run = rt.store.get_current_run(ref.sub_session_id) if ref is not None else None
        if ref is None or run is None:
            continue
        found[call_id] = {
            "session_id": ref.sub_session_id,
            "run_id": run.run_id,
            "workflow_id": run.workflow_id,
            "request": None,
            "deadline_ms": None if timeout_ms is None else ref.started_at + timeout_ms,
            "timeout_ms": timeout_ms,
            "started_at_ms": ref.started_at,
            "error": None,
        }
    return found


CHILD_FIELDS = frozenset(
    {"parent_session_id", "parent_stream_id", "root_session_id", "child_mode", "deadline_ms", "timeout_ms"}
)
"""The fields of a :class:`RunRequest` that make a run its parent's child."""


def continued_child(store: SessionStore, session: SessionRecord, continues: str | None) -> dict[str, Any]:
    """What the continuation of a child session keeps of the run it continues (empty for a top-level one).

    A child's first run is started by its parent's workflow with its place in the tree
    (``starts.child_run_request``); the run after the child parks on its own children (or on a
    human, for a persistent child) is started by whoever wakes it, from the session alone. Without
    these fields that continuation would run as a top-level run: its chunks would not reach the
    parent's stream, its end would not wake a parked parent, an ephemeral child would no longer
    refuse human calls and the deadline of the parent's call would lapse. So they are carried over
    from the recorded input of the run it continues (``continues``); if DBOS no longer has it
    (retention deleted the workflow) the store gives all but the mode and the deadline. Only a
    suspended run's continuation (its session still ``active``) is the same child going on; an
    interrupted child resumed by hand runs on its own, as before: its parent has had its result.
    """
    if session.parent_session_id is None or session.status != "active":
        return {}
    if continues is not None:
        found = DBOS.list_workflows(workflow_ids=[continues], load_output=False)
        inputs: Any = found[0].input if found else None
        args = inputs.get("args") if isinstance(inputs, dict) else None
        if args:
            previous = RunRequest.model_validate(args[0])
            if previous.parent_session_id is not None:
                return previous.model_dump(include=set(CHILD_FIELDS))
    parent = store.load_session(session.parent_session_id)
    return {
        "parent_session_id": session.parent_session_id,
        "parent_stream_id": None if parent is None else parent.stream_id,
        "root_session_id": session.root_session_id,
    }


class ParentWaker:
    """Continues parked parents whose children have all ended, off the caller's thread.

    ``continue_parked(session_id)`` starts a suspended run's continuation (idempotent: one
    compare-and-set under a deterministic id). :data:`_WAKE_THREADS` threads at most, started on
    first use: a burst of children ending queues here rather than adding a thread per parent.
    """

    def __init__(self, store: SessionStore, continue_parked: Callable[[str], object]) -> None:
        self._store = store
        self._continue_parked = continue_parked
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def wake(self, parent_session_id: str) -> None:
        """Continue ``parent_session_id`` soon if it is parked and no child it awaits is still active."""
        with self._lock:
            if self._closed:
                return  # shutting down: the sweep of the next worker continues it
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=_WAKE_THREADS, thread_name_prefix="helix-parent-wake")
            self._pool.submit(self._wake, parent_session_id)

    def wake_now(self, parent_session_id: str) -> object | None:
        """:meth:`wake` in the caller's thread; returns what ``continue_parked`` returned (``None``: not ready)."""
        if not self._store.pending.parents_with_children_done(session_id=parent_session_id):
            return None
        return self._continue_parked(parent_session_id)

    def _wake(self, parent_session_id: str) -> None:
        try:
            self.wake_now(parent_session_id)
        except Exception as exc:  # the sweep continues it; a wake is an optimisation of latency
            _log.warning("waking parked parent %s failed: %r", parent_session_id, exc)

    def close(self) -> None:
        """Stop taking wakes and wait for the ones running (a pending wake's parent is the sweep's)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


__all__ = [
    "CHILD_FIELDS",
    "CHILD_PARK_PATCH",
    "ParentWaker",
    "awaited_children",
    "awaited_children_step",
    "continued_child",
    "parking_enabled",
]
