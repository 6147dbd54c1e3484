"""Tool abort signals: tripped by ``abort`` and ``interrupt``, here and in every other process.

Two paths reach a running tool's :class:`~helix_dbos.tool.AbortSignal`:

- **local**: the executor that takes an ``abort`` / ``interrupt`` call trips the live signals of
  the session's tools in its own process at once (:meth:`ToolAbortSignals.trip`);
- **durable**: every signal carries a probe that reads the session's abort and interrupt flags
  from the store, consulted (rate-limited) when the tool reads the signal. That reaches a tool
  running in another worker than the one that took the call, with no watcher thread and no cost
  for tools that never look.

Signals are held weakly: a tool's signal lives as long as its ``ToolContext``.
"""

from __future__ import annotations

import threading
import weakref

from helix_dbos.store.base import SessionStore
from helix_dbos.tool import AbortSignal


def durable_stop_reason(store: SessionStore, session_id: str) -> str | None:
    """Why the session's run must stop, read from the store (``None`` when it need not)."""
    session = store.load_session(session_id)
    if session is None:
        return None
    if session.aborted or session.status == "failed":
        return f"aborted: {session.abort_reason}" if session.abort_reason else "aborted"
    if session.interrupt_requested:
        context = session.interrupt_context
        reason = context.reason if context is not None else None
        return f"interrupted: {reason}" if reason else "interrupted"
    return None


class ToolAbortSignals:
    """The abort signals of the tools running in this process, by session."""

    def __init__(self, store: SessionStore, *, probe_interval_seconds: float = 0.25) -> None:
        self._store = store
        self._interval = probe_interval_seconds
        self._live: dict[str, weakref.WeakSet[AbortSignal]] = {}
        self._lock = threading.Lock()

    def for_tool(self, session_id: str) -> AbortSignal:
        """A new signal for one tool call of the session, tripped by either path."""
        signal = AbortSignal(
            lambda: durable_stop_reason(self._store, session_id), probe_interval_seconds=self._interval
        )
        with self._lock:
            if len(self._live) > 1024:  # sessions whose tools have all finished
                self._live = {k: v for k, v in self._live.items() if v}
            self._live.setdefault(session_id, weakref.WeakSet()).add(signal)
        return signal

    def trip(self, session_id: str, reason: str) -> int:
        """Trip the session's live signals in this process; returns how many were live."""
        with self._lock:
            live = list(self._live.pop(session_id, ()))
        for signal in live:
            signal.abort(reason)
        return len(live)
