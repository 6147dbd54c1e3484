"""A sub-agent child's deadline, kept by the process running the child (one thread for all).

A sub-agent tool's ``timeout_ms`` was kept by the parent's wait step alone: at the deadline it
stopped the child. A parent parked on its children (:mod:`.child_park`) has no wait running, so
the deadline must be kept where the child runs. The child's run request carries the deadline its
open recorded (``RunRequest.deadline_ms``); its run registers it here when it starts (workflow
code, so a run recovered in another process registers it there) and drops it when its session
ends (a child parked on its own children keeps it: the deadline is the session's). One
daemon thread sleeps until the earliest deadline and stops the child that passed it the way the
parent's wait does (:func:`~.child_control.stop_child`, the same error), then wakes the parent:
a stopped child ends without its finalize, which is what would have woken it. A parent waiting
hot stops the child at the same instant itself; both stops are idempotent.

Memory is lost with its process. A child running there is recovered elsewhere and registers its
deadline again; a child parked on its own children runs nowhere until they end. So the parent's
reference records the deadline too (``SubSessionRef.deadline_ms``), and the workers' sweep
(:meth:`ChildDeadlines.sweep`, every second in every worker) stops any child still active past
it, the same way.
"""

from __future__ import annotations

import heapq
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from helix_dbos._clock import now_ms
from helix_dbos.runtime.child_control import stop_child, timeout_error

if TYPE_CHECKING:
    from helix_dbos.runtime.services import RuntimeServices

_log = logging.getLogger("helix_dbos.runtime.child_deadlines")


@dataclass(frozen=True, order=True)
class _Deadline:
    at_ms: int
    session_id: str
    timeout_ms: int | None
    parent_session_id: str | None


class ChildDeadlines:
    """The deadlines of the child runs running in this process, kept by one thread started on first use."""

    def __init__(self, rt: RuntimeServices) -> None:
        self._rt = rt
        self._heap: list[_Deadline] = []
        self._live: set[str] = set()
        """Child sessions still watched; one that ended is dropped here and skipped when its deadline comes."""
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, session_id: str, deadline_ms: int, timeout_ms: int | None, parent_session_id: str | None) -> None:
        """Stop the child at ``deadline_ms`` unless :meth:`forget` is called first (idempotent per session)."""
        with self._cond:
            if self._closed or session_id in self._live:
                return
            self._live.add(session_id)
            heapq.heappush(self._heap, _Deadline(deadline_ms, session_id, timeout_ms, parent_session_id))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="helix-child-deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()

    def forget(self, session_id: str) -> None:
        """The child's session ended: its deadline no longer applies."""
        with self._cond:
            self._live.discard(session_id)

    def close(self) -> None:
        """Stop the thread (a recovered child registers its deadline again where it runs next)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def sweep(self) -> list[str]:
        """Stop the children past the deadline their parent's reference records; returns their sessions.

        The safety net of the in-memory watch (a child whose watching process died); a child some
        process still watches may be stopped by both, which is harmless (the stop is idempotent).
        """
        try:
            due_children = self._rt.store.pending.children_past_deadline(now_ms())
        except Exception as exc:  # the sweep's other work (parked calls, parents) must still run
            _log.warning("reading the children past their deadline failed: %r", exc)
            return []
        stopped = []
        for parent_session_id, ref in due_children:
            assert ref.deadline_ms is not None  # the query's condition
            due = _Deadline(ref.deadline_ms, ref.sub_session_id, ref.deadline_ms - ref.started_at, parent_session_id)
            try:
                self._stop(due)
            except Exception as exc:  # the next sweep tries again
                _log.warning("stopping child %s at its deadline failed: %r", due.session_id, exc)
            else:
                stopped.append(due.session_id)
        return stopped

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._heap or self._heap[0].at_ms > now_ms()):
                    wait = None if not self._heap else max(0.0, (self._heap[0].at_ms - now_ms()) / 1000)
                    self._cond.wait(wait)
                if self._closed:
                    return
                due = heapq.heappop(self._heap)
                if due.session_id not in self._live:
                    continue
                self._live.discard(due.session_id)
            try:
                self._stop(due)
            except Exception as exc:  # the parent's wait (hot) or a later recovery keeps it instead
                _log.warning("stopping child %s at its deadline failed: %r", due.session_id, exc)

    def _stop(self, due: _Deadline) -> None:
        rt = self._rt
        session = rt.store.load_session(due.session_id)
        if session is None or session.status != "active":
            return
        stop_child(rt, due.session_id, timeout_error(due.timeout_ms))
        if due.parent_session_id is not None and rt.parent_waker is not None:
            rt.parent_waker.wake(due.parent_session_id)


__all__ = ["ChildDeadlines"]
