"""Wake-ups for SQL stream readers: per-stream change counters, thread-safe, loop-agnostic.

A SQL reader waits for a change of its stream between two queries. The change may be announced by
the manager's own flusher thread, by the ``LISTEN`` thread, or by a call on another event loop, and
the reader may run on any loop (the runtime's background loop, a FastAPI handler's). So a reader
parks a future of *its* loop in a :class:`Waiter`, and whoever bumps the stream's :class:`Signal`
resolves it with ``call_soon_threadsafe``. No asyncio object outlives a wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(eq=False, slots=True)
class Waiter:
    """A reader parked on its own loop; :meth:`wake` may be called from any thread."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]

    def wake(self) -> None:
        """Resolve the parked future on its loop (a no-op once that loop is closed)."""
        with contextlib.suppress(RuntimeError):  # the reader's loop is already closed
            self.loop.call_soon_threadsafe(_resolve, self.future)


@dataclass(eq=False)
class Signal:
    """Change counters of one stream, shared by this process's readers of it.

    ``data`` moves on every change; ``control`` only when chunks were removed, which voids what a
    reader prefetched.
    """

    data: int = 0
    control: int = 0
    readers: int = 0
    waiters: set[Waiter] = field(default_factory=set)


class Signals:
    """Per-stream signals, kept only while a reader of the stream is attached in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, Signal] = {}

    def attach(self, stream_id: str) -> Signal:
        """Count a reader in and return the stream's signal."""
        with self._lock:
            signal = self._streams.get(stream_id)
            if signal is None:
                signal = self._streams[stream_id] = Signal()
            signal.readers += 1
            return signal

    def detach(self, stream_id: str) -> None:
        """Count a reader out; the signal goes with the stream's last reader."""
        with self._lock:
            signal = self._streams.get(stream_id)
            if signal is not None:
                signal.readers -= 1
                if signal.readers <= 0:
                    del self._streams[stream_id]

    def bump(self, stream_id: str, *, control: bool = False) -> None:
        """Announce a change of ``stream_id`` and wake its parked readers (from any thread)."""
        with self._lock:
            signal = self._streams.get(stream_id)
            if signal is None:
                return
            woken = self._bump(signal, control)
        for waiter in woken:
            waiter.wake()

    def bump_all(self, *, control: bool = False) -> None:
        """Announce a change of every stream (NOTIFY reconnected, the manager closed)."""
        with self._lock:
            woken = [w for signal in self._streams.values() for w in self._bump(signal, control)]
        for waiter in woken:
            waiter.wake()

    def park(self, signal: Signal, seen: int) -> Waiter | None:
        """Park a waiter of the running loop unless ``signal.data`` already moved past ``seen``."""
        loop = asyncio.get_running_loop()
        waiter = Waiter(loop, loop.create_future())
        with self._lock:
            if signal.data != seen:
                return None
            signal.waiters.add(waiter)
        return waiter

    def unpark(self, signal: Signal, waiter: Waiter) -> None:
        """Forget ``waiter`` (woken, timed out or cancelled) and cancel its future if still pending."""
        with self._lock:
            signal.waiters.discard(waiter)
        if not waiter.future.done():
            waiter.future.cancel()

    @staticmethod
    def _bump(signal: Signal, control: bool) -> list[Waiter]:
        signal.data += 1
        if control:
            signal.control += 1
        woken = list(signal.waiters)
        signal.waiters.clear()
        return woken
