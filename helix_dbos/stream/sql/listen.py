"""PostgreSQL ``LISTEN`` / ``NOTIFY`` for stream readers: the channel, its payloads, the listener thread.

Every write transaction on PostgreSQL announces the stream it touched on :data:`NOTIFY_CHANNEL`
(see :mod:`helix_dbos.stream.sql.postgres`); one :class:`Listener` per manager holds a ``LISTEN``
connection and wakes the readers of that stream in its process. NOTIFY is only ever a shortcut:
while the connection is down readers poll, and the listener reconnects with backoff on its own, so
a database restart costs latency, never a chunk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable
from typing import Any, Final

import psycopg

from helix_dbos.stream.sql.signals import Signals

NOTIFY_CHANNEL: Final = "helix_streams"
"""The PostgreSQL ``LISTEN`` / ``NOTIFY`` channel; payload ``c:<stream_id>``, ``x:<stream_id>`` or ``*``."""

MAX_NOTIFY_ID_BYTES: Final = 7000
"""Longer stream ids are announced as ``*`` (wake every reader): NOTIFY payloads stop at 8000 bytes."""

_log = logging.getLogger(__name__)


def notify_payload(stream_id: str, *, control: bool) -> str:
    """The payload announcing a change of ``stream_id``: ``x:`` when chunks were removed, else ``c:``."""
    if len(stream_id.encode()) > MAX_NOTIFY_ID_BYTES:
        return "*"
    return f"{'x' if control else 'c'}:{stream_id}"


def dispatch(payload: str, signals: Signals) -> None:
    """Wake the readers a received payload concerns."""
    if payload == "*":
        signals.bump_all(control=True)
        return
    kind, _, stream_id = payload.partition(":")
    signals.bump(stream_id, control=kind == "x")


class Listener:
    """A thread holding one ``LISTEN helix_streams`` connection, reconnecting when it drops.

    ``on_payload`` gets every payload; ``on_state`` is called whenever ``LISTEN`` starts or stops
    being in effect, so readers re-query (anything committed while it was not was not announced).
    """

    def __init__(self, conninfo: str, on_payload: Callable[[str], None], on_state: Callable[[], None]) -> None:
        self._conninfo = conninfo
        self._on_payload = on_payload
        self._on_state = on_state
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="helix-stream-listener", daemon=True)
        self.listening = False
        """True while LISTEN is in effect; readers poll rarely then."""

    def start(self) -> None:
        """Start the thread; it connects, and keeps reconnecting until :meth:`stop`."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (waking it from its ``select``) and release its pipe."""
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._thread.join(10)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.listening = True
                    self._on_state()  # re-query: anything committed before LISTEN was not announced
                    backoff = 0.1
                    self._pump(conn)
            except Exception as exc:
                if not self._stop.is_set():
                    _log.warning("stream listener: %r; readers poll until it reconnects", exc)
            finally:
                if self.listening:
                    self.listening = False
                    self._on_state()
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def _pump(self, conn: psycopg.Connection[Any]) -> None:
        pgconn = conn.pgconn
        while not self._stop.is_set():
            ready, _, _ = select.select([pgconn.socket, self._wake_r], [], [], 60.0)
            if pgconn.socket in ready:
                pgconn.consume_input()  # raises when the connection is gone
                while (notify := pgconn.notifies()) is not None:
                    self._on_payload(notify.extra.decode("utf-8", "replace"))
