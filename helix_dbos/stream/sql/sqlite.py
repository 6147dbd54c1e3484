"""The stream manager on SQLite: row-by-row batch inserts, reads in a transaction, no ``NOTIFY``.

SQLite has no ``LISTEN``: readers in other processes learn of writes by polling (readers in the
writing process are woken directly). A read runs inside ``BEGIN`` so that a reader's one statement
sees one snapshot even while the flusher commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.store.engine import begin_write
from helix_dbos.stream.sql import queries
from helix_dbos.stream.sql.dialect import StreamDialect
from helix_dbos.stream.sql.flusher import PendingChunk
from helix_dbos.stream.sql.listen import Listener

_INSERT_CHUNK: Final = (
    "INSERT INTO helix_stream_chunks (stream_id, sequence, run_id, step, type, chunk, dedupe_key, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (stream_id, dedupe_key) DO NOTHING"
)


class SqliteStreamDialect(StreamDialect):
    """SQLite: see the module docstring."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._append = queries.append_statement()

    @property
    def append_statement(self) -> sa.TextClause:
        """The append upsert as :mod:`~helix_dbos.stream.sql.queries` writes it."""
        return self._append

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection inside a transaction, so one statement reads one snapshot."""
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def single_statement(self) -> AbstractContextManager[Connection]:
        """A write transaction (``BEGIN IMMEDIATE``), as every SQLite writer takes."""
        return begin_write(self.engine)

    def insert_chunks(
        self, conn: Connection, stream_id: str, base: int, items: list[PendingChunk], now: int
    ) -> list[int] | None:
        """Insert ``items`` as ``base + 1, ...``; ``None`` if all went in, else the stored sequences."""
        rows = [
            (stream_id, base + offset, item.run_id, item.step, item.chunk_type, item.body, item.dedupe_key, now)
            for offset, item in enumerate(items, start=1)
        ]
        if conn.exec_driver_sql(_INSERT_CHUNK, rows).rowcount == len(items):
            return None
        return [int(s) for s in conn.execute(queries.SEQUENCES_AFTER, {"sid": stream_id, "after": base}).scalars()]

    def send_notify(self, conn: Connection, stream_id: str, *, control: bool) -> None:
        """Nothing to send: SQLite has no ``NOTIFY``, readers elsewhere poll."""

    def listener(self, on_payload: Callable[[str], None], on_state: Callable[[], None]) -> Listener | None:
        """No ``LISTEN`` on SQLite: ``None``."""
        return None
