"""Tool abort signals: tripped by ``abort`` and ``interrupt``, here and in every other process.

Two paths reach a running tool's :class:`~helix_dbos.tool.AbortSignal`:

- **local**: the executor that takes an ``abort`` / ``interrupt`` call trips the live signals of
  the session's tools in its own process at once (:meth:`ToolAbortSignals.trip`);
- **durable**: when a tool reads its signal (at most every ``probe_interval_seconds``), a read of
  the session's abort and interrupt flags is queued for a background thread, which trips the
  signal if a flag is set. That reaches a tool running in another worker than the one that took
  the call, with no cost for tools that never look. Reading the signal never waits for the
  database: during an outage (when store reads retry for a long time) a tool polling its signal
  keeps running, and sees the flag once the database answers.

Signals are held weakly: a tool's signal lives as long as its ``ToolContext``.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable

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


class _Prober:
    """One daemon thread that reads the durable flags for signals that asked, one at a time."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._requests: queue.SimpleQueue[tuple[str, weakref.ref[AbortSignal], threading.Event]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def request(self, session_id: str, signal: AbortSignal, in_flight: threading.Event) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="helix-abort-probe", daemon=True)
                self._thread.start()
        in_flight.set()
        self._requests.put((session_id, weakref.ref(signal), in_flight))

    def _serve(self) -> None:
        while True:
            session_id, ref, in_flight = self._requests.get()
            try:
                if ref() is None:
                    continue  # the tool has finished
                reason = durable_stop_reason(self._store, session_id)
                signal = ref()
                if reason is not None and signal is not None:
                    signal.abort(reason)
            except Exception:  # an unreadable flag is not an abort; the tool's next look asks again
                pass
            finally:
                in_flight.clear()


class ToolAbortSignals:
    """The abort signals of the tools running in this process, by session."""

    def __init__(self, store: SessionStore, *, probe_interval_seconds: float = 0.25) -> None:
        self._interval = probe_interval_seconds
        self._prober = _Prober(store)
        self._live: dict[str, weakref.WeakSet[AbortSignal]] = {}
        self._lock = threading.Lock()

    def for_tool(self, session_id: str) -> AbortSignal:
        """A new signal for one tool call of the session, tripped by either path."""
        holder: list[weakref.ref[AbortSignal]] = []
        signal = AbortSignal(self._probe(session_id, holder), probe_interval_seconds=self._interval)
        holder.append(weakref.ref(signal))
        with self._lock:
            if len(self._live) > 1024:  # sessions whose tools have all finished
                self._live = {k: v for k, v in self._live.items() if v}
            self._live.setdefault(session_id, weakref.WeakSet()).add(signal)
        return signal

    def _probe(self, session_id: str, holder: list[weakref.ref[AbortSignal]]) -> Callable[[], str | None]:
        in_flight = threading.Event()

        def probe() -> str | None:
            signal = holder[0]() if holder else None
            if signal is not None and not in_flight.is_set():
                self._prober.request(session_id, signal, in_flight)
            return None  # the prober trips the signal when the flag is set

        return probe

    def trip(self, session_id: str, reason: str) -> int:
        """Trip the session's live signals in this process; returns how many were live."""
        with self._lock:
            live = list(self._live.pop(session_id, ()))
        for signal in live:
            signal.abort(reason)
        return len(live)
