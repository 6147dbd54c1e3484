"""Tool abort signals (helix_dbos.runtime.abort) over a stand-in store: pure logic, no database."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from helix_dbos.runtime.abort import ToolAbortSignals


class SlowStore:
    """``load_session`` as a store in an outage would answer: late, then with the flags set."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.reads = 0
        self.flags: dict[str, Any] = {"aborted": False, "status": "active", "interrupt_requested": False}

    def load_session(self, session_id: str) -> Any:
        self.reads += 1
        time.sleep(self.delay)
        return SimpleNamespace(abort_reason=None, interrupt_context=None, **self.flags)


def test_reading_a_signal_never_waits_for_the_store() -> None:
    store = SlowStore(delay=0.5)
    signals = ToolAbortSignals(store, probe_interval_seconds=0.01)  # type: ignore[arg-type]
    signal = signals.for_tool("s1")
    store.flags["interrupt_requested"] = True
    started = time.monotonic()
    while not signal.aborted:
        assert time.monotonic() - started < 5
        time.sleep(0.001)
    polls_took = time.monotonic() - started
    assert 0.4 < polls_took < 2 and signal.reason == "interrupted"
    assert store.reads <= 2  # one read in flight at a time, however often the tool looks


def test_local_trip_and_weak_registry() -> None:
    store = SlowStore(delay=0)
    signals = ToolAbortSignals(store, probe_interval_seconds=10)  # type: ignore[arg-type]
    kept = signals.for_tool("s1")
    signals.for_tool("s1")  # dropped at once: its tool is gone
    assert signals.trip("s1", "aborted: bye") == 1
    assert kept.aborted and kept.reason == "aborted: bye"
    assert signals.trip("s1", "again") == 0
    waiter = signals.for_tool("s2")
    threading.Timer(0.05, signals.trip, args=("s2", "interrupted")).start()
    assert waiter.wait(5) and waiter.reason == "interrupted"
