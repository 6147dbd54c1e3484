"""Counting the round trips to PostgreSQL that an engine's work costs: statements, BEGIN, COMMIT, ROLLBACK.

SQLAlchemy's ``begin`` event fires for every ``connect()`` block, and its ``commit`` and
``rollback`` events even when psycopg sends nothing, so they are not round trips. What psycopg 3
sends is decided here from the connection's state just before: a statement on a connection that is
not in autocommit mode and has no transaction open is preceded by a ``BEGIN`` of its own; a commit
or a rollback costs a round trip only when a transaction is open.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg.pq
import sqlalchemy as sa

_IDLE = psycopg.pq.TransactionStatus.IDLE


@dataclass
class RoundTrips:
    """The round trips seen, in order: ``(thread name, connection id, text)`` (``BEGIN``, ``COMMIT``, SQL)."""

    events: list[tuple[str, int, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, conn: Any, text: str) -> None:
        with self._lock:
            self.events.append((threading.current_thread().name, id(conn.connection.dbapi_connection), text))

    def _statement(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        dbapi = conn.connection.dbapi_connection
        if not dbapi.autocommit and dbapi.info.transaction_status == _IDLE:
            self._add(conn, "BEGIN")
        self._add(conn, " ".join(statement.split()))

    def _end(self, kind: str) -> Any:
        def on_end(conn: Any) -> None:
            if conn.connection.dbapi_connection.info.transaction_status != _IDLE:
                self._add(conn, kind)

        return on_end

    def on(self, thread: str | None = None) -> list[str]:
        """The texts of the round trips made by ``thread`` (every thread's when ``None``)."""
        with self._lock:
            return [text for name, _, text in self.events if thread is None or name == thread]

    def clear(self) -> None:
        with self._lock:
            self.events.clear()

    def transactions_with(self, prefix: str) -> list[list[str]]:
        """Each round trip group holding a statement that starts with ``prefix``: its transaction
        (``BEGIN`` to ``COMMIT``/``ROLLBACK`` on one connection), or the statement alone in autocommit."""
        with self._lock:
            events = list(self.events)
        groups: list[list[str]] = []
        open_on: dict[int, list[str]] = {}
        for _, conn, text in events:
            if text == "BEGIN":
                open_on[conn] = ["BEGIN"]
            elif conn in open_on:
                open_on[conn].append(text)
                if text in ("COMMIT", "ROLLBACK"):
                    groups.append(open_on.pop(conn))
            else:
                groups.append([text])
        return [g for g in groups if any(t.startswith(prefix) for t in g)]


@contextmanager
def counting(engine: sa.Engine) -> Iterator[RoundTrips]:
    """Record the round trips ``engine``'s connections make inside the block."""
    trips = RoundTrips()
    listeners = [
        ("before_cursor_execute", trips._statement),
        ("commit", trips._end("COMMIT")),
        ("rollback", trips._end("ROLLBACK")),
    ]
    for name, fn in listeners:
        sa.event.listen(engine, name, fn)
    try:
        yield trips
    finally:
        for name, fn in listeners:
            sa.event.remove(engine, name, fn)
