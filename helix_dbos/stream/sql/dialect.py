"""What differs between PostgreSQL and SQLite for the stream manager, as one small interface.

dbos-transact-py draws the same line (``_sys_db.py`` with ``_sys_db_postgres.py`` and
``_sys_db_sqlite.py``): the manager and its storage speak to a :class:`StreamDialect`, and each
database's specifics (how a batch of chunks is inserted, how reads are wrapped, ``NOTIFY`` and
``LISTEN``) live in :mod:`helix_dbos.stream.sql.postgres` or :mod:`helix_dbos.stream.sql.sqlite`
instead of ``if postgres:`` branches through the code. :func:`helix_dbos.stream.sql.storage.dialect_for`
picks one for an engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.stream.sql import queries
from helix_dbos.stream.sql.flusher import PendingChunk
from helix_dbos.stream.sql.listen import Listener


class StreamDialect(ABC):
    """One database's way of storing and announcing stream chunks."""

    notify: bool = False
    """Whether write transactions announce their streams (``NOTIFY``) and readers can ``LISTEN``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    @abstractmethod
    def append_statement(self) -> sa.TextClause:
        """The upsert that locks a stream row and reserves sequences (``queries.APPEND``)."""

    @abstractmethod
    def reading(self) -> AbstractContextManager[Connection]:
        """A connection for a single-statement read that sees one snapshot."""

    @abstractmethod
    def single_statement(self) -> AbstractContextManager[Connection]:
        """A connection for a write that is one statement (atomic by itself where the database allows)."""

    def terminate(self, conn: Connection, stream_id: str, params: dict[str, Any]) -> None:
        """Record the stream's end (``queries.TERMINATE``) and announce it, delivered when ``conn`` commits."""
        conn.execute(queries.terminate_statement(), params)
        self.send_notify(conn, stream_id, control=False)

    def append_alone(self, stream_id: str, items: list[PendingChunk], status: str | None, now: int) -> bool | None:
        """:meth:`append_chunks` as one statement outside any transaction, when that is the whole of it.

        ``True`` when every chunk went in, ``False`` when the stream had ended (nothing written),
        ``None`` having written nothing when the append needs a transaction (a replayed chunk's
        holes to close under the row lock), or at once where the dialect has no such path.
        """
        return None

    def end_with_chunks_alone(
        self, stream_id: str, items: list[PendingChunk], status: str, error: str | None, now: int
    ) -> bool:
        """The stream's last chunks and its end as one statement outside any transaction.

        ``True`` when it stored every chunk and the end; ``False`` having written nothing when the
        end needs the transaction path (a replayed chunk's holes to close, a stream with no row or
        one that has ended already), or at once where the dialect has no such path.
        """
        return False

    def append_groups_alone(self, groups: dict[str, list[PendingChunk]], now: int) -> set[str] | None:
        """Every stream's :meth:`append_chunks` as one statement outside any transaction.

        For a flusher batch of several streams, none changing its status. Returns the streams that
        had ended (nothing written for them), or ``None`` having written nothing when the batch
        needs the transaction path (a replayed chunk's holes to close), or at once where the
        dialect has no such statement.
        """
        return None

    @abstractmethod
    def insert_chunks(
        self, conn: Connection, stream_id: str, base: int, items: list[PendingChunk], now: int
    ) -> list[int] | None:
        """Insert ``items`` as ``base + 1, ...``; ``None`` if all went in, else the stored sequences.

        Rows whose ``(stream_id, dedupe_key)`` is already stored are skipped, not refused.
        """

    def append_chunks(
        self, conn: Connection, stream_id: str, items: list[PendingChunk], status: str | None, now: int
    ) -> tuple[int, list[int] | None] | None:
        """Reserve ``len(items)`` sequences on the stream row and insert ``items`` there.

        Returns ``None`` when the stream has ended (nothing written), else ``(base, stored)`` with
        the chunks numbered ``base + 1, ...`` and ``stored`` as :meth:`insert_chunks` returns it.
        Two statements here; a dialect may do it in one round trip.
        """
        params = {"sid": stream_id, "n": len(items), "status": status, "now": now}
        row = conn.execute(self.append_statement, params).first()
        if row is None:
            return None
        base = int(row[0]) - len(items)
        return base, self.insert_chunks(conn, stream_id, base, items, now)

    riding_complete: str = "false"
    """A condition over :meth:`riding_append`'s CTEs, true when :meth:`settle_append` will run no
    statement (the ``RidingWrite``'s ``complete``). ``false`` here: no riding append at all."""

    def riding_append(
        self, stream_id: str, items: list[PendingChunk], status: str | None, now: int
    ) -> tuple[str, str, dict[str, Any]] | None:
        """:meth:`append_chunks` as CTEs to ride in another writer's statement, where the database can.

        Returns ``(ctes, columns, params)`` for a ``RidingWrite`` (``helix_dbos.store.dialect``):
        the columns are the stream's latest sequence after the reservation (``NULL``: the stream has
        ended, nothing written) and the count of rows inserted, which :meth:`settle_append` reads.
        ``None`` here: the append is made with its own statements.
        """
        return None

    def riding_start(self, stream_id: str, now: int) -> tuple[str, str, dict[str, Any]] | None:
        """A run's start of ``stream_id`` (its latest sequence, its activation) as SQL for another writer's statement.

        Returns ``(sequence, ctes, params)`` for a ``RidingStart`` (``helix_dbos.store.dialect``):
        a scalar expression of the latest sequence, the activation's CTEs, their parameters.
        ``None`` here: the store's transaction reads and activates the stream with statements.
        """
        return None

    def settle_append(
        self, conn: Connection, stream_id: str, latest: int | None, inserted: int, n: int
    ) -> tuple[int, list[int] | None] | None:
        """:meth:`append_chunks`'s result from a riding append's columns (``n`` chunks reserved)."""
        raise NotImplementedError  # only dialects that return a riding append are asked

    @abstractmethod
    def send_notify(self, conn: Connection, stream_id: str, *, control: bool) -> None:
        """Announce a change of ``stream_id`` when ``conn`` commits (a no-op without ``NOTIFY``)."""

    @abstractmethod
    def listener(self, on_payload: Callable[[str], None], on_state: Callable[[], None]) -> Listener | None:
        """A ``LISTEN`` thread (not started) for this database, or ``None`` when readers only poll."""
