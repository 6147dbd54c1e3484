"""The stream manager's database operations: synchronous, one transaction each, retried.

:class:`StreamStorage` is everything :class:`~helix_dbos.stream.sql.manager.SqlStreamManager`
does to the database, kept apart from the manager's async, cache and thread bookkeeping so each can
be read on its own. Every method is one whole transaction (or one autocommit read) and retries
transient database errors under ``retry_policy`` (``helix_dbos.store.retry``); the caller runs it
in a worker thread (``asyncio.to_thread``) or on the flusher thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, TextClause

from helix_dbos.store.dialect import RidingStart, RidingWrite
from helix_dbos.store.engine import begin_write, now_ms
from helix_dbos.store.retry import RetryPolicy, retrying
from helix_dbos.stream.base import ChunkRecord, StreamInfo, StreamStatus
from helix_dbos.stream.sql import queries
from helix_dbos.stream.sql.dialect import StreamDialect
from helix_dbos.stream.sql.flusher import PendingChunk
from helix_dbos.stream.sql.postgres import PostgresStreamDialect
from helix_dbos.stream.sql.queries import StreamRow, chunk_from_storage
from helix_dbos.stream.sql.sqlite import SqliteStreamDialect

__all__ = ["StreamStorage", "dialect_for"]


def dialect_for(engine: Engine, *, notify: bool) -> StreamDialect:
    """The :class:`StreamDialect` of ``engine``'s database; ``notify`` matters on PostgreSQL only."""
    if engine.dialect.name == "postgresql":
        return PostgresStreamDialect(engine, notify=notify)
    return SqliteStreamDialect(engine)


def _unique(items: list[PendingChunk]) -> list[PendingChunk]:
    """``items`` without a second chunk of the same dedupe key (the first one wins)."""
    if not any(item.dedupe_key is not None for item in items):
        return items
    keys: set[str] = set()
    unique = []
    for item in items:
        if item.dedupe_key is not None:
            if item.dedupe_key in keys:
                continue
            keys.add(item.dedupe_key)
        unique.append(item)
    return unique


def _last_status(items: list[PendingChunk]) -> str | None:
    """The stream status the batch's last chunk carrying one sets (``None``: unchanged)."""
    return next((item.status for item in reversed(items) if item.status is not None), None)


class StreamStorage:
    """Reads and writes ``helix_streams`` / ``helix_stream_chunks`` through one dialect."""

    def __init__(self, dialect: StreamDialect, retry: RetryPolicy) -> None:
        self.dialect = dialect
        self._engine = dialect.engine
        self._retry = retry

    @property
    def retry_policy(self) -> RetryPolicy:
        """How every operation retries transient database errors (read by ``@retrying``)."""
        return self._retry

    # writes -------------------------------------------------------------------------------------

    @retrying
    def activate(self, stream_id: str) -> None:
        """Create the stream or make it active; an ended one moves its ``activation``."""
        with begin_write(self._engine) as conn:
            self.activate_in(conn, stream_id)

    def activate_in(self, conn: Connection, stream_id: str) -> None:
        """:meth:`activate` through ``conn``, inside the caller's transaction."""
        conn.execute(queries.ACTIVATE, {"sid": stream_id, "now": now_ms()})

    def riding_start(self, stream_id: str) -> RidingStart | None:
        """:meth:`latest_sequence_in` and :meth:`activate_in` as SQL for a store's one-statement start (PostgreSQL)."""
        fragment = self.dialect.riding_start(stream_id, now_ms())
        if fragment is None:
            return None
        sequence, ctes, params = fragment
        return RidingStart(sequence, ctes, params)

    def latest_sequence_in(self, conn: Connection, stream_id: str) -> int:
        """The stream's latest sequence read through ``conn`` (0 for a stream that does not exist)."""
        row = conn.execute(queries.INFO, {"sid": stream_id}).first()
        return 0 if row is None else int(row[1])

    @retrying
    def terminate(
        self,
        stream_id: str,
        status: StreamStatus,
        stored_error: str | None,
        before: Callable[[Connection], None] | None = None,
    ) -> None:
        """Record the stream's end (``ended`` / ``failed``) at its latest sequence, and announce it.

        ``before(conn)`` runs first in the same transaction (the stream's last queued chunks).
        """
        params = {"sid": stream_id, "status": status, "error": stored_error, "now": now_ms()}
        if before is None:  # one statement: no transaction of its own on PostgreSQL
            with self.dialect.single_statement() as conn:
                self.dialect.terminate(conn, stream_id, params)
            return
        with begin_write(self._engine) as conn:
            before(conn)
            self.dialect.terminate(conn, stream_id, params)

    @retrying
    def end_with_chunks_alone(
        self, stream_id: str, items: list[PendingChunk], status: StreamStatus, stored_error: str | None
    ) -> bool:
        """The stream's last ``items`` and its end as one statement where the dialect can (PostgreSQL).

        ``False`` having written nothing otherwise: the caller ends the stream with :meth:`terminate`,
        the chunks written first in its transaction.
        """
        return self.dialect.end_with_chunks_alone(stream_id, _unique(items), status, stored_error, now_ms())

    def write_groups(self, groups: dict[str, list[PendingChunk]]) -> set[str]:
        """Store every stream's chunks atomically; returns the streams that had ended.

        One autocommitted statement where the dialect has one (one stream, or several with no
        status change), else one transaction.

        Not retried here: the flusher's ``BatchCommitter`` retries it and isolates failures.
        """
        now = now_ms()
        if len(groups) == 1:  # the common case: one statement, outside a transaction where it can be
            ((stream_id, items),) = groups.items()
            alone = self.dialect.append_alone(stream_id, _unique(items), _last_status(items), now)
            if alone is not None:
                return set() if alone else {stream_id}
        elif all(_last_status(items) is None for items in groups.values()):  # many streams: one statement
            together = self.dialect.append_groups_alone({sid: _unique(items) for sid, items in groups.items()}, now)
            if together is not None:
                return together
        ended: set[str] = set()
        with begin_write(self._engine) as conn:
            # Every process locks stream rows in the same order, so two batches never deadlock.
            for stream_id in sorted(groups):
                if not self.append(conn, stream_id, groups[stream_id], now):
                    ended.add(stream_id)
        return ended

    def append(self, conn: Connection, stream_id: str, items: list[PendingChunk], now: int) -> bool:
        """Store one stream's share of a batch; ``False`` when the stream has ended.

        Sequences come from the stream row in this transaction: the upsert adds the batch's size to
        ``latest_sequence`` and the row lock it takes orders writers in every process. Chunks whose
        dedupe key is stored already are skipped and the survivors renumbered down, so sequences
        stay contiguous.
        """
        unique = _unique(items)
        appended = self.dialect.append_chunks(conn, stream_id, unique, _last_status(items), now)
        return self._close_holes(conn, stream_id, appended, len(unique))

    def riding_append(
        self, stream_id: str, items: list[PendingChunk], now: int, on_done: Callable[[bool], None]
    ) -> RidingWrite | None:
        """:meth:`append` as a ``RidingWrite``, to go in a step commit's own statement (PostgreSQL).

        ``on_done`` gets :meth:`append`'s answer inside the transaction (again if it is retried).
        ``None`` where the dialect cannot (SQLite): the caller appends with :meth:`append`.
        """
        unique = _unique(items)
        fragment = self.dialect.riding_append(stream_id, unique, _last_status(items), now)
        if fragment is None:
            return None
        ctes, columns, params = fragment

        def finish(conn: Connection | None, values: Sequence[Any]) -> None:
            latest, inserted = values
            if conn is None:  # ran alone: its guard held, so every chunk went in, or the stream had ended
                on_done(latest is not None)
                return
            appended = self.dialect.settle_append(conn, stream_id, latest, int(inserted), len(unique))
            on_done(self._close_holes(conn, stream_id, appended, len(unique)))

        return RidingWrite(ctes, columns, params, finish, complete=self.dialect.riding_complete)

    def _close_holes(
        self, conn: Connection, stream_id: str, appended: tuple[int, list[int] | None] | None, reserved: int
    ) -> bool:
        """After an append of ``reserved`` chunks: renumber the survivors of a replay; ``False`` if it had ended."""
        if appended is None:
            return False
        base, stored = appended
        if stored is not None:
            # Some keys were stored already (a replay). The row lock is still ours, so close the
            # holes they left: move the new rows down, lowest first, and give the numbers back.
            renumber = [
                {"sid": stream_id, "old": old, "new": base + rank}
                for rank, old in enumerate(stored, start=1)
                if old != base + rank
            ]
            if renumber:
                conn.execute(queries.RENUMBER, renumber)
            unused = reserved - len(stored)
            conn.execute(queries.FIX_COUNTERS, {"sid": stream_id, "unused": unused, "missing": unused})
        return True

    @retrying
    def cleanup(self, stream_id: str, step_count: int) -> bool:
        """Delete chunks of steps after ``step_count`` and record the truncation; ``True`` if any went."""
        return self._truncate(stream_id, step_count, queries.DELETE_AFTER_STEP, {"step": step_count})

    @retrying
    def cleanup_after(self, stream_id: str, sequence: int, step_count: int) -> bool:
        """Delete chunks after ``sequence`` and record the truncation at ``step_count``; ``True`` if any went."""
        return self._truncate(stream_id, step_count, queries.DELETE_AFTER_SEQUENCE, {"seq": sequence})

    def _truncate(self, stream_id: str, step_count: int, delete: TextClause, params: dict[str, int]) -> bool:
        now = now_ms()
        with begin_write(self._engine) as conn:
            # Lock the row first, as writers do: the same lock order everywhere.
            if conn.execute(queries.LOCK_STREAM, {"sid": stream_id, "now": now}).first() is None:
                return False
            removed = [int(s) for s in conn.execute(delete, {"sid": stream_id, **params}).scalars()]
            if not removed:
                return False
            conn.execute(
                queries.MARK_TRUNCATED,
                {
                    "sid": stream_id,
                    "removed": len(removed),
                    "step": step_count,
                    "max_removed": max(removed),
                    "now": now,
                },
            )
            self.dialect.send_notify(conn, stream_id, control=True)
        return True

    @retrying
    def delete(self, stream_id: str) -> None:
        """Delete the stream row and its chunks."""
        with begin_write(self._engine) as conn:
            conn.execute(queries.DELETE_STREAM, {"sid": stream_id})
            conn.execute(queries.DELETE_ALL, {"sid": stream_id})
            self.dialect.send_notify(conn, stream_id, control=True)

    @retrying
    def reset(self, stream_id: str) -> None:
        """Delete every chunk, make the stream active and move its ``activation``; sequences go on."""
        with begin_write(self._engine) as conn:
            conn.execute(queries.RESET, {"sid": stream_id, "now": now_ms()})
            conn.execute(queries.DELETE_ALL, {"sid": stream_id})
            self.dialect.send_notify(conn, stream_id, control=True)

    # reads --------------------------------------------------------------------------------------

    @retrying
    def load_row(self, stream_id: str) -> StreamRow | None:
        """The stream's row, or ``None`` for an unknown stream."""
        with self.dialect.reading() as conn:
            row = conn.execute(queries.ROW, {"sid": stream_id}).first()
        return None if row is None else StreamRow.from_row(row)

    @retrying
    def read_page(self, stream_id: str, after: int) -> tuple[StreamRow | None, list[ChunkRecord]]:
        """The stream's row and the next page of chunks after ``after``, in one snapshot."""
        with self.dialect.reading() as conn:
            rows = conn.execute(queries.PAGE, {"sid": stream_id, "after": after, "limit": queries.READ_PAGE}).all()
        if not rows:
            return None, []
        records = [
            ChunkRecord.model_construct(sequence=int(r[10]), chunk=chunk_from_storage(r[11]))
            for r in rows
            if r[10] is not None
        ]
        return StreamRow.from_row(rows[0]), records

    @retrying
    def read_records(self, stream_id: str, after: int) -> list[ChunkRecord]:
        """Every stored chunk after ``after``, with its sequence."""
        with self.dialect.reading() as conn:
            rows = conn.execute(queries.RECORDS, {"sid": stream_id, "after": after}).all()
        return [ChunkRecord.model_construct(sequence=int(r[0]), chunk=chunk_from_storage(r[1])) for r in rows]

    @retrying
    def info(self, stream_id: str) -> StreamInfo | None:
        """The stream's status and counters, or ``None`` for an unknown stream."""
        with self.dialect.reading() as conn:
            row = conn.execute(queries.INFO, {"sid": stream_id}).first()
        if row is None:
            return None
        return StreamInfo(status=row[0], latest_sequence=int(row[1]), chunk_count=int(row[2]))
