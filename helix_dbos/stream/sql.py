"""Durable, resumable streams in PostgreSQL or SQLite: :class:`SqlStreamManager`.

The in-memory manager loses every chunk with its process and cannot serve a reader in another
process. This one stores chunks in ``helix_stream_chunks`` (one row per chunk, keyed by
``(stream_id, sequence)``) and the stream's state in one ``helix_streams`` row, so a client can
reconnect to any server process with its last sequence (SSE ``Last-Event-ID``) and read on.

Writes
    ``StreamWriter.write`` only serialises the chunk and queues it; a flusher thread commits the
    queue in batches. A batch takes up to ``batch_max_chunks`` chunks, and a commit starts at most
    once per ``batch_max_delay`` seconds unless the batch is full or someone flushes, so a lone
    chunk waits at most ``batch_max_delay`` while a burst of deltas costs one transaction per
    ``batch_max_chunks``. That batching is where the throughput comes from: a transaction costs
    the same for one chunk as for sixty-four. ``flush()``, ``close()``, ``end_stream``,
    ``fail_stream``, ``cleanup_to_step``, ``reset_stream``, ``get_stream_info`` and reader creation
    wait for the queue first, so they observe every chunk written before them.

    Sequences come from the stream row in the chunk inserts' transaction: an upsert adds the
    batch's size to ``latest_sequence`` and returns it, and the row lock it takes orders writers in
    every process, so a stream's sequences commit in increasing order and a reader that saw N never
    later finds a chunk below N. A write that fails to commit is reported by the writer's next
    ``write``/``flush``/``close``, not by the ``write`` that queued it.

Faults (``helix_dbos.stream.flusher``, ``helix_dbos.store.retry``)
    Every read and write retries transient database errors (a restart, a dropped connection) for
    the retry bound, so a database restart delays chunks but never drops them, and ``end_stream``
    still lands. A batch the database refuses is written again stream by stream, so one stream's
    bad chunk never costs another stream its chunks; a chunk refused on its own becomes an
    ``error`` chunk with ``code="stream_gap"`` at its position. Chunks lost to an outage longer than
    the bound are counted and reported by such a marker on the stream's next write or end. Text is
    stored through the reversible escape of ``helix_dbos.store.codec`` (NUL, lone surrogates).

Idempotent chunks
    ``write(chunk, dedupe_key=...)`` (or :meth:`SqlStreamManager.write_keyed`) stores a chunk once
    per ``(stream_id, dedupe_key)``: a replayed DBOS workflow re-emitting its deterministic chunks
    (keys like ``f"{run_id}:{ordinal}"``) adds nothing. The insert is ``ON CONFLICT (stream_id,
    dedupe_key) DO NOTHING``; when it dropped some rows, the batch's surviving rows are renumbered
    down and the unused numbers handed back, all under the stream's row lock, so sequences stay
    contiguous. (Readers never rely on that: they ask for ``sequence > cursor``, so a gap, say one
    left by a chunk a cleanup removed, cannot stall them.) A key removed by ``cleanup_to_step`` or
    ``reset_stream`` can be written again, which is what a re-executed step needs.

Readers
    A reader runs one query per wake-up: the stream row joined with the next page of chunks after
    its cursor, one statement and so one snapshot, so the truncation marker, the end marker and the
    chunks it sees agree. It then waits for a change. On PostgreSQL (``notify=True``) every write
    transaction sends ``NOTIFY helix_streams`` with ``c:<stream_id>`` (``x:<stream_id>`` when chunks
    were removed) and one ``LISTEN`` connection per manager wakes the matching readers; while that
    connection is down, and always on SQLite, readers poll every ``poll_interval``. Writes made
    through the same manager wake its readers directly, without a round trip.

Ends, reactivation, truncation
    ``end_stream`` / ``fail_stream`` record ``end_sequence`` (and the error) on the row. A new
    ``create_writer`` reactivates an ended stream and bumps ``activation``, so a reader attached
    before that end still finishes there: it takes ``end_sequence`` as its end when it sees the
    activation move. ``reset_stream`` deletes the chunks, moves ``activation`` too (attached readers
    stop) and keeps counting sequences. ``cleanup_to_step`` deletes chunks of later steps and writes
    the truncation marker; a reader notices it on its next query and raises
    :class:`~helix_dbos.errors.StreamTruncatedError` when a removed chunk was still ahead of its
    cursor (exact for one cleanup between two of its queries; after several it raises whenever its
    cursor is below the last cleanup's high-water mark, which errs towards a reconnect).

Event loops and threads
    No asyncio object outlives a call: database work runs in ``asyncio.to_thread`` and readers wait
    on a future of whichever loop they run on, woken thread-safely. One manager therefore serves the
    runtime's background loop and FastAPI handlers on other loops at once. It owns two daemon
    threads, started on first use: the flusher and, on PostgreSQL, the listener. Call
    :meth:`SqlStreamManager.close` (or ``aclose``) at shutdown: chunks still queued are committed
    then, and lost if the process exits without it.

Caveats
    - ``create_writer`` on a stream this manager itself activated (and has not ended since) skips
      the database. A stream ended by *another* process is then not reactivated: its writes fail
      with ``transport_error``. One process should own a stream's turns (the runtime's does).
    - A reader that does not iterate through two whole turns (end, reactivate, end) finishes at the
      later end. A reader in another process on SQLite may yield chunks it fetched just before a
      cleanup removed them (it fetches pages of ``_READ_PAGE`` chunks).
    - Every manager on a database should use the same ``notify`` setting: ``notify=False`` also
      stops sending ``NOTIFY``, and readers elsewhere then learn of its writes by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import select
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

import psycopg
import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.errors import HelixError, StreamTruncatedError
from helix_dbos.store import codec
from helix_dbos.store.engine import begin_write as _begin_write
from helix_dbos.store.engine import create_engine_for, now_ms
from helix_dbos.store.migrate import check_migrated
from helix_dbos.store.retry import RetryPolicy, retrying
from helix_dbos.stream.chunks import (
    RunPausedChunk,
    RunResumedChunk,
    StreamChunk,
    StreamChunkAdapter,
    chunk_from_json,
)
from helix_dbos.stream.flusher import BatchCommitter, Flusher, PendingChunk, storage_body
from helix_dbos.stream.manager import ChunkRecord, StreamInfo, StreamStatus

if TYPE_CHECKING:
    from helix_dbos.stream.manager import StreamManager

__all__ = ["NOTIFY_CHANNEL", "SqlStreamManager", "SqlStreamReader", "SqlStreamWriter"]

NOTIFY_CHANNEL: Final = "helix_streams"
"""The PostgreSQL ``LISTEN`` / ``NOTIFY`` channel; payload ``c:<stream_id>``, ``x:<stream_id>`` or ``*``."""

_log = logging.getLogger(__name__)

_READ_PAGE: Final = 256
"""Chunks a reader fetches per query."""
_LISTEN_SAFETY_POLL: Final = 1.0
"""Seconds between a reader's queries while NOTIFY is live: a backstop, never the normal path."""
_MAX_NOTIFY_ID_BYTES: Final = 7000
"""Longer stream ids are announced as ``*`` (wake every reader): NOTIFY payloads stop at 8000 bytes."""
_LOCAL_STATUS_LIMIT: Final = 10_000
"""Entries of the local stream-status cache before it is dropped and rebuilt."""
_TERMINAL: Final = frozenset({"ended", "failed"})


# SQL ----------------------------------------------------------------------------------------------

_STREAM_COLUMNS = (
    "stream_id, status, latest_sequence, chunk_count, activation, end_sequence, error, "
    "truncation_epoch, created_at, updated_at"
)

_APPEND = """
INSERT INTO helix_streams ({columns})
VALUES (:sid, COALESCE(CAST(:status AS VARCHAR), 'active'), :n, :n, 0, NULL, NULL, 0, :now, :now)
ON CONFLICT (stream_id) DO UPDATE SET
    latest_sequence = helix_streams.latest_sequence + excluded.latest_sequence,
    chunk_count = helix_streams.chunk_count + excluded.chunk_count,
    status = COALESCE(CAST(:status AS VARCHAR), helix_streams.status),
    updated_at = excluded.updated_at
WHERE helix_streams.status NOT IN ('ended', 'failed')
RETURNING latest_sequence{notify}
"""
"""Create or lock the stream row and reserve ``n`` sequences; no row back: the stream has ended."""

# pg_notify in RETURNING saves a round trip per batch; NOTIFY is delivered at commit.
_PG_NOTIFY_RETURNING = (
    f", pg_notify('{NOTIFY_CHANNEL}', CASE WHEN octet_length(stream_id) > {_MAX_NOTIFY_ID_BYTES} "
    "THEN '*' ELSE 'c:' || stream_id END)"
)

# One parameter for the whole batch, a JSON array of ``[run_id, dedupe_key, chunk]``: a short query
# that psycopg and the server parse once, and no per-value escaping (a 64-row VALUES list, or one
# text array per column, costs milliseconds of client CPU per batch). ``json`` (not ``jsonb``)
# operators return the chunk's text verbatim; its ``type`` and ``step`` come from the chunk itself.
_PG_INSERT_CHUNKS = sa.text(
    """
INSERT INTO helix_stream_chunks (stream_id, sequence, run_id, step, type, chunk, dedupe_key, created_at)
SELECT :sid, :base + t.ord, t.x ->> 0, CAST(t.x -> 2 ->> 'step' AS INTEGER), t.x -> 2 ->> 'type', t.x -> 2,
       t.x ->> 1, :now
FROM json_array_elements(CAST(:rows AS JSON)) WITH ORDINALITY AS t(x, ord)
ON CONFLICT (stream_id, dedupe_key) DO NOTHING
RETURNING sequence
"""
)

_SQLITE_INSERT_CHUNK = (
    "INSERT INTO helix_stream_chunks (stream_id, sequence, run_id, step, type, chunk, dedupe_key, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (stream_id, dedupe_key) DO NOTHING"
)

_SEQUENCES_AFTER = sa.text(
    "SELECT sequence FROM helix_stream_chunks WHERE stream_id = :sid AND sequence > :after ORDER BY sequence"
)

_RENUMBER = sa.text("UPDATE helix_stream_chunks SET sequence = :new WHERE stream_id = :sid AND sequence = :old")

_FIX_COUNTERS = sa.text(
    "UPDATE helix_streams SET latest_sequence = latest_sequence - :unused, chunk_count = chunk_count - :missing "
    "WHERE stream_id = :sid"
)

_ACTIVATE = sa.text(
    f"""
INSERT INTO helix_streams ({_STREAM_COLUMNS})
VALUES (:sid, 'active', 0, 0, 0, NULL, NULL, 0, :now, :now)
ON CONFLICT (stream_id) DO UPDATE SET
    activation = helix_streams.activation
        + CASE WHEN helix_streams.status IN ('ended', 'failed') THEN 1 ELSE 0 END,
    status = 'active',
    updated_at = excluded.updated_at
"""
)

_TERMINATE = sa.text(
    f"""
INSERT INTO helix_streams ({_STREAM_COLUMNS})
VALUES (:sid, :status, 0, 0, 0, 0, :error, 0, :now, :now)
ON CONFLICT (stream_id) DO UPDATE SET
    status = excluded.status,
    end_sequence = helix_streams.latest_sequence,
    error = excluded.error,
    updated_at = excluded.updated_at
"""
)

_RESET = sa.text(
    f"""
INSERT INTO helix_streams ({_STREAM_COLUMNS})
VALUES (:sid, 'active', 0, 0, 0, NULL, NULL, 0, :now, :now)
ON CONFLICT (stream_id) DO UPDATE SET
    status = 'active',
    activation = helix_streams.activation + 1,
    end_sequence = helix_streams.latest_sequence,
    error = NULL,
    chunk_count = 0,
    updated_at = excluded.updated_at
"""
)

_DELETE_ALL = sa.text("DELETE FROM helix_stream_chunks WHERE stream_id = :sid")

_DELETE_STREAM = sa.text("DELETE FROM helix_streams WHERE stream_id = :sid")

_LOCK_STREAM = sa.text("UPDATE helix_streams SET updated_at = :now WHERE stream_id = :sid RETURNING latest_sequence")

_DELETE_AFTER_STEP = sa.text(
    "DELETE FROM helix_stream_chunks WHERE stream_id = :sid AND step > :step RETURNING sequence"
)

_MARK_TRUNCATED = sa.text(
    """
UPDATE helix_streams SET
    chunk_count = chunk_count - :removed,
    truncation_epoch = truncation_epoch + 1,
    truncated_at_step = :step,
    truncation_sequence = latest_sequence,
    truncation_max_removed = :max_removed,
    updated_at = :now
WHERE stream_id = :sid
"""
)

_NOTIFY = sa.text("SELECT pg_notify(:channel, :payload)")

_INFO = sa.text("SELECT status, latest_sequence, chunk_count FROM helix_streams WHERE stream_id = :sid")

_ROW_COLUMNS = (
    "s.status, s.latest_sequence, s.chunk_count, s.activation, s.end_sequence, s.error, "
    "s.truncation_epoch, s.truncated_at_step, s.truncation_sequence, s.truncation_max_removed"
)

_ROW = sa.text(f"SELECT {_ROW_COLUMNS} FROM helix_streams s WHERE s.stream_id = :sid")

# One statement, so one snapshot on both backends: the marker columns and the chunks agree.
_PAGE = sa.text(
    f"""
SELECT {_ROW_COLUMNS}, c.sequence, CAST(c.chunk AS TEXT) AS chunk
FROM helix_streams s
LEFT JOIN (
    SELECT sequence, chunk FROM helix_stream_chunks
    WHERE stream_id = :sid AND sequence > :after
    ORDER BY sequence
    LIMIT :limit
) c ON 1 = 1
WHERE s.stream_id = :sid
ORDER BY c.sequence
"""
)

_RECORDS = sa.text(
    "SELECT sequence, CAST(chunk AS TEXT) FROM helix_stream_chunks "
    "WHERE stream_id = :sid AND sequence > :after ORDER BY sequence"
)


@dataclass(frozen=True, slots=True)
class _StreamRow:
    """The columns of ``helix_streams`` a reader acts on."""

    status: StreamStatus
    latest_sequence: int
    chunk_count: int
    activation: int
    end_sequence: int | None
    error: str | None
    truncation_epoch: int
    truncated_at_step: int | None
    truncation_sequence: int | None
    truncation_max_removed: int | None

    @classmethod
    def from_row(cls, row: Any) -> _StreamRow:
        return cls(
            status=cast(StreamStatus, row[0]),
            latest_sequence=int(row[1]),
            chunk_count=int(row[2]),
            activation=int(row[3]),
            end_sequence=None if row[4] is None else int(row[4]),
            error=None if row[5] is None else codec.unescape_text(row[5]),
            truncation_epoch=int(row[6]),
            truncated_at_step=None if row[7] is None else int(row[7]),
            truncation_sequence=None if row[8] is None else int(row[8]),
            truncation_max_removed=None if row[9] is None else int(row[9]),
        )


# wake-ups -----------------------------------------------------------------------------------------


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(eq=False, slots=True)
class _Waiter:
    """A reader parked on its own loop; :meth:`wake` may be called from any thread."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the reader's loop is already closed
            self.loop.call_soon_threadsafe(_resolve, self.future)


@dataclass(eq=False)
class _Signal:
    """Change counters of one stream, shared by this process's readers of it.

    ``data`` moves on every change; ``control`` only when chunks were removed, which voids what a
    reader prefetched.
    """

    data: int = 0
    control: int = 0
    readers: int = 0
    waiters: set[_Waiter] = field(default_factory=set)


class _Signals:
    """Per-stream signals, kept only while a reader of the stream is attached in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, _Signal] = {}

    def attach(self, stream_id: str) -> _Signal:
        with self._lock:
            signal = self._streams.get(stream_id)
            if signal is None:
                signal = self._streams[stream_id] = _Signal()
            signal.readers += 1
            return signal

    def detach(self, stream_id: str) -> None:
        with self._lock:
            signal = self._streams.get(stream_id)
            if signal is not None:
                signal.readers -= 1
                if signal.readers <= 0:
                    del self._streams[stream_id]

    def bump(self, stream_id: str, *, control: bool = False) -> None:
        with self._lock:
            signal = self._streams.get(stream_id)
            if signal is None:
                return
            woken = self._bump(signal, control)
        for waiter in woken:
            waiter.wake()

    def bump_all(self, *, control: bool = False) -> None:
        with self._lock:
            woken = [w for signal in self._streams.values() for w in self._bump(signal, control)]
        for waiter in woken:
            waiter.wake()

    @staticmethod
    def _bump(signal: _Signal, control: bool) -> list[_Waiter]:
        signal.data += 1
        if control:
            signal.control += 1
        woken = list(signal.waiters)
        signal.waiters.clear()
        return woken

    async def wait(self, signal: _Signal, seen: int, timeout: float, reader: SqlStreamReader) -> None:
        """Return when ``signal.data`` moves past ``seen``, the reader closes, or after ``timeout``."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop, loop.create_future())
        with self._lock:
            if signal.data != seen:
                return
            signal.waiters.add(waiter)
        reader._waiter = waiter
        try:
            if not reader._done:
                await asyncio.wait([waiter.future], timeout=timeout)
        finally:
            reader._waiter = None
            with self._lock:
                signal.waiters.discard(waiter)
            if not waiter.future.done():
                waiter.future.cancel()


# the listener -------------------------------------------------------------------------------------


class _Listener:
    """A thread holding one ``LISTEN helix_streams`` connection, reconnecting when it drops."""

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
        self._thread.start()

    def stop(self) -> None:
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


# the manager --------------------------------------------------------------------------------------


class SqlStreamWriter:
    """A :class:`~helix_dbos.stream.manager.StreamWriter` queueing chunks for the manager's flusher."""

    def __init__(self, manager: SqlStreamManager, stream_id: str, run_id: str, agent_type: str) -> None:
        self._manager = manager
        self._closed = False
        self._error: HelixError | None = None
        self.stream_id = stream_id
        self.run_id = run_id
        self.agent_type = agent_type

    async def write(self, chunk: StreamChunk, *, dedupe_key: str | None = None) -> None:
        """Queue ``chunk``; it is stored once per ``dedupe_key`` (``None``: always stored).

        Returns before the chunk is committed (see the module docstring on batching). Raises
        ``HelixError`` (``transport_error``) if this writer is closed, if the stream is known to
        have ended, or if an earlier chunk of this writer failed to commit.
        """
        self._raise_pending()
        if self._closed:
            raise HelixError(f"Writer for stream {self.stream_id!r} is closed", code="transport_error", retryable=False)
        await self._manager._write(self.stream_id, chunk, dedupe_key=dedupe_key, run_id=self.run_id, writer=self)

    async def flush(self) -> None:
        """Wait until every chunk queued so far is committed; raise if one of this writer's failed."""
        await self._manager.flush()
        self._raise_pending()

    async def close(self) -> None:
        """Flush, then refuse further writes; the stream stays open (``end_stream`` ends it)."""
        if not self._closed:
            self._closed = True
            await self._manager.flush()
        self._raise_pending()

    def _fail(self, error: HelixError) -> None:
        if self._error is None:
            self._error = error

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error


@dataclass(frozen=True, slots=True)
class _Terminal:
    after_sequence: int
    error: str | None


class SqlStreamReader:
    """A live :class:`~helix_dbos.stream.manager.ResumableStreamReader` over a stored stream.

    Use it from one task at a time. ``total_chunks`` and ``latest_sequence`` are as of the reader's
    last query. :meth:`next_record` gives the sequence with each chunk (the SSE event id).
    """

    def __init__(self, manager: SqlStreamManager, stream_id: str, from_sequence: int, row: _StreamRow) -> None:
        self._manager = manager
        self.stream_id = stream_id
        self._cursor = from_sequence
        self._activation = row.activation
        self._truncation_epoch = row.truncation_epoch
        # A reader attached to an ended stream stops at that end even if a new turn starts.
        self._terminal: _Terminal | None = (
            _Terminal(row.end_sequence or 0, row.error) if row.status in _TERMINAL else None
        )
        self._latest = row.latest_sequence
        self._total = row.chunk_count
        self._buffer: deque[ChunkRecord] = deque()
        self._buffer_control = 0
        self._done = False
        self._waiter: _Waiter | None = None
        self._signal = manager._signals.attach(stream_id)
        manager._ensure_listener()

    @property
    def current_sequence(self) -> int:
        """Sequence of the last chunk yielded (the start position before the first one)."""
        return self._cursor

    @property
    def total_chunks(self) -> int:
        """Chunks stored in the stream, as of this reader's last query."""
        return self._total

    @property
    def latest_sequence(self) -> int:
        """Highest sequence assigned in the stream, as of this reader's last query."""
        return self._latest

    def __aiter__(self) -> SqlStreamReader:
        """Return the reader itself: it is consumed once."""
        return self

    async def __anext__(self) -> StreamChunk:
        """Return the next chunk, waiting while the stream is open and has nothing new."""
        return (await self.next_record()).chunk

    async def next_record(self) -> ChunkRecord:
        """Return the next chunk with its sequence; ``StopAsyncIteration`` at the end.

        Raises ``HelixError`` (``transport_error``) after the last chunk of a failed stream and
        :class:`StreamTruncatedError` when a cleanup removed a chunk this reader had not reached.
        """
        manager = self._manager
        signal = self._signal
        while True:
            if self._done or manager._closed:
                self._finish()
                raise StopAsyncIteration
            if self._buffer and self._buffer_control == signal.control:
                record = self._buffer.popleft()
                if self._terminal is None or record.sequence <= self._terminal.after_sequence:
                    self._cursor = record.sequence
                    return record
                self._stop_at_terminal(self._terminal)
            self._buffer.clear()
            seen_data, seen_control = signal.data, signal.control
            row, records = await asyncio.to_thread(manager._read_page, self.stream_id, self._cursor)
            if self._done:
                continue
            if row is None:  # the row was deleted behind the manager's back
                self._finish()
                raise StopAsyncIteration
            self._apply(row)
            if records:
                self._buffer.extend(records)
                self._buffer_control = seen_control
                continue
            if self._terminal is not None:
                self._stop_at_terminal(self._terminal)
            await manager._signals.wait(signal, seen_data, manager._wait_timeout(), self)

    async def close(self) -> None:
        """Detach from the stream and wake a pending ``__anext__`` so it stops."""
        self._finish()
        waiter = self._waiter
        if waiter is not None:
            waiter.wake()

    def _apply(self, row: _StreamRow) -> None:
        self._latest = row.latest_sequence
        self._total = row.chunk_count
        if row.truncation_epoch != self._truncation_epoch:
            if row.truncation_epoch == self._truncation_epoch + 1:
                horizon = row.truncation_max_removed or 0  # exactly what the one cleanup removed
            else:
                horizon = row.truncation_sequence or 0  # several cleanups: all removed chunks lie below
            ended_before = self._terminal is not None and self._cursor >= self._terminal.after_sequence
            if horizon > self._cursor and not ended_before:
                self._finish()
                raise StreamTruncatedError(self.stream_id, self._cursor, row.truncated_at_step or 0)
            self._truncation_epoch = row.truncation_epoch
        if self._terminal is None and (row.activation != self._activation or row.status in _TERMINAL):
            self._terminal = _Terminal(row.end_sequence or 0, row.error)

    def _stop_at_terminal(self, terminal: _Terminal) -> None:
        self._finish()
        if terminal.error is not None:
            raise HelixError(terminal.error, code="transport_error", retryable=False)
        raise StopAsyncIteration

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._buffer.clear()
            self._manager._signals.detach(self.stream_id)


class SqlStreamManager:
    """A :class:`~helix_dbos.stream.manager.StreamManager` on PostgreSQL or SQLite.

    Streams survive restarts and are shared by every process on the database; see the module
    docstring for the batching, dedupe, wake-up and truncation design. Semantics otherwise follow
    :class:`~helix_dbos.stream.manager.InMemoryStreamManager`.

    Args:
        database_url: ``postgresql://...`` or ``sqlite:///path``, or an engine you own (made with
            :func:`helix_dbos.store.sql.create_engine_for`; it is not disposed by :meth:`close`).
        poll_interval: Seconds between a waiting reader's queries when no NOTIFY can wake it.
        notify: On PostgreSQL, send ``NOTIFY`` with every write and wake readers by ``LISTEN``.
        batch_max_chunks: Most chunks committed in one transaction.
        batch_max_delay: Least seconds between two commit starts, unless a batch is full or a
            flush is waiting: the most a lone chunk waits. ``0`` commits as soon as possible.
        max_pending_chunks: Queued chunks above which ``write`` waits for the flusher.
        check_schema: Refuse to start on a database not migrated to this version.
        retry: How writes and reads retry transient database errors (default: ``HELIX_DB_RETRY_SECONDS``,
            see ``helix_dbos.store.retry``).
    """

    def __init__(
        self,
        database_url: str | Engine,
        *,
        poll_interval: float = 0.05,
        notify: bool = True,
        batch_max_chunks: int = 64,
        batch_max_delay: float = 0.02,
        max_pending_chunks: int = 10_000,
        check_schema: bool = True,
        retry: RetryPolicy | None = None,
    ) -> None:
        if batch_max_chunks < 1:
            raise ValueError("batch_max_chunks must be at least 1")
        if isinstance(database_url, Engine):
            self._engine = database_url
            self._owns_engine = False
        else:
            self._engine = create_engine_for(database_url)
            self._owns_engine = True
        self._is_postgres = self._engine.dialect.name == "postgresql"
        if check_schema:
            try:
                check_migrated(self._engine, self._engine.url.render_as_string(hide_password=False))
            except BaseException:
                if self._owns_engine:
                    self._engine.dispose()
                raise
        # Single-statement reads need no transaction: autocommit saves BEGIN and COMMIT round trips.
        self._read_engine = (
            self._engine.execution_options(isolation_level="AUTOCOMMIT") if self._is_postgres else self._engine
        )
        self.poll_interval = poll_interval
        self.notify = notify and self._is_postgres
        self._max_pending = max_pending_chunks
        self._append_sql = sa.text(
            _APPEND.format(columns=_STREAM_COLUMNS, notify=_PG_NOTIFY_RETURNING if self.notify else "")
        )
        self._signals = _Signals()
        self._retry = retry if retry is not None else RetryPolicy.from_env()
        self._committer = BatchCommitter(self._write_groups, self._retry)
        self._flusher = Flusher(
            self._commit_batch, max_chunks=batch_max_chunks, max_delay=batch_max_delay, name="helix-stream-flusher"
        )
        self._listener: _Listener | None = None
        self._listener_lock = threading.Lock()
        # What this manager itself last did to a stream: "active" lets create_writer skip the
        # database, "ended" lets write fail at once instead of at commit.
        self._local_status: dict[str, str] = {}
        self._closed = False

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine the manager uses."""
        return self._engine

    @property
    def retry_policy(self) -> RetryPolicy:
        """How reads and writes retry transient database errors (see ``helix_dbos.store.retry``)."""
        return self._retry

    @property
    def listening(self) -> bool:
        """Whether a ``LISTEN`` connection is live (readers then wake by NOTIFY, not polling)."""
        return self._listener is not None and self._listener.listening

    # writers ------------------------------------------------------------------------------------

    async def create_writer(self, stream_id: str, run_id: str, agent_type: str) -> SqlStreamWriter:
        """Return a writer, creating the stream or reactivating it if it ended, failed or paused.

        Reactivating an ended stream moves its ``activation``, so readers attached before the end
        still stop there. Cheap when this manager already activated the stream: no database call.
        """
        self._check_open()
        if self._local_status.get(stream_id) != "active":
            await self.flush()  # let queued chunks of the previous turn hit the end they were written before
            await asyncio.to_thread(self._execute_write, _ACTIVATE, {"sid": stream_id, "now": now_ms()})
            self._set_local(stream_id, "active")
        return SqlStreamWriter(self, stream_id, run_id, agent_type)

    async def activate(self, stream_id: str) -> None:
        """Make the stream active in the database whatever this manager has cached.

        A run's start calls this: another process may have ended or failed the stream (an abort sent
        to an API process, a run finished on another worker) while this manager still caches it as
        active, and ``create_writer`` trusts the cache.
        """
        self._check_open()
        await self.flush()
        await asyncio.to_thread(self._execute_write, _ACTIVATE, {"sid": stream_id, "now": now_ms()})
        self._set_local(stream_id, "active")

    async def write_keyed(
        self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None, *, run_id: str | None = None
    ) -> None:
        """Queue ``chunk`` without a writer, stored once per ``dedupe_key``.

        Creates the stream if it does not exist; raises ``HelixError`` at once if this manager
        ended it. A failure at commit time is logged (a writer's ``write`` would report it).
        """
        self._check_open()
        await self._write(stream_id, chunk, dedupe_key=dedupe_key, run_id=run_id, writer=None)

    async def flush(self) -> None:
        """Wait until every chunk queued so far (by any writer of this manager) is committed."""
        await asyncio.wrap_future(self._flusher.barrier())

    async def _write(
        self,
        stream_id: str,
        chunk: StreamChunk,
        *,
        dedupe_key: str | None,
        run_id: str | None,
        writer: SqlStreamWriter | None,
    ) -> None:
        if self._local_status.get(stream_id) == "ended":
            raise _ended_error(stream_id)
        status: StreamStatus | None = None
        if isinstance(chunk, RunPausedChunk):
            status = "paused"
            self._local_status.pop(stream_id, None)  # the next create_writer must reactivate
        elif isinstance(chunk, RunResumedChunk):
            status = "active"
        pending = PendingChunk(
            stream_id=stream_id,
            run_id=run_id,
            chunk_type=chunk.type,
            step=chunk.step,
            body=storage_body(chunk),
            dedupe_key=dedupe_key,
            status=status,
            writer=writer,
        )
        if self._flusher.submit(pending) > self._max_pending:
            await self.flush()

    def _commit_batch(self, batch: list[PendingChunk]) -> None:
        """Store ``batch`` (runs on the flusher thread; ``stream.flusher`` says what happens on errors)."""
        outcome = self._committer.commit(batch)
        for stream_id, items in outcome.ended.items():
            self._set_local(stream_id, "ended")
            error = _ended_error(stream_id)
            _log.warning("stream flusher: dropped %d chunk(s): %s", len(items), error.message)
            for item in items:
                if item.writer is not None:
                    item.writer._fail(error)
        for stream_id in outcome.stored:
            self._signals.bump(stream_id)

    def _write_groups(self, groups: dict[str, list[PendingChunk]]) -> set[str]:
        """Store every stream's chunks in one transaction; returns the streams that had ended."""
        now = now_ms()
        ended: set[str] = set()
        with _begin_write(self._engine) as conn:
            # Every process locks stream rows in the same order, so two batches never deadlock.
            for stream_id in sorted(groups):
                if not self._append(conn, stream_id, groups[stream_id], now):
                    ended.add(stream_id)
        return ended

    def _append(self, conn: Connection, stream_id: str, items: list[PendingChunk], now: int) -> bool:
        """Store one stream's share of a batch; ``False`` when the stream has ended."""
        unique = items
        if any(item.dedupe_key is not None for item in items):
            keys: set[str] = set()
            unique = []
            for item in items:
                if item.dedupe_key is not None:
                    if item.dedupe_key in keys:
                        continue
                    keys.add(item.dedupe_key)
                unique.append(item)
        status = next((item.status for item in reversed(items) if item.status is not None), None)
        reserved = len(unique)
        row = conn.execute(self._append_sql, {"sid": stream_id, "n": reserved, "status": status, "now": now}).first()
        if row is None:
            return False
        base = int(row[0]) - reserved
        if self._is_postgres:
            stored = self._insert_postgres(conn, stream_id, base, unique, now)
        else:
            stored = self._insert_sqlite(conn, stream_id, base, unique, now)
        if stored is not None:
            # Some keys were stored already (a replay). The row lock is still ours, so close the
            # holes they left: move the new rows down, lowest first, and give the numbers back.
            renumber = [
                {"sid": stream_id, "old": old, "new": base + rank}
                for rank, old in enumerate(stored, start=1)
                if old != base + rank
            ]
            if renumber:
                conn.execute(_RENUMBER, renumber)
            unused = reserved - len(stored)
            conn.execute(_FIX_COUNTERS, {"sid": stream_id, "unused": unused, "missing": unused})
        return True

    @staticmethod
    def _insert_postgres(
        conn: Connection, stream_id: str, base: int, items: list[PendingChunk], now: int
    ) -> list[int] | None:
        """Insert ``items`` as ``base + 1, ...``; ``None`` if all went in, else the stored sequences."""
        rows = ",".join(f"[{json.dumps(item.run_id)},{json.dumps(item.dedupe_key)},{item.body}]" for item in items)
        result = conn.execute(_PG_INSERT_CHUNKS, {"sid": stream_id, "base": base, "rows": f"[{rows}]", "now": now})
        stored = sorted(int(sequence) for sequence in result.scalars())
        return None if len(stored) == len(items) else stored

    @staticmethod
    def _insert_sqlite(
        conn: Connection, stream_id: str, base: int, items: list[PendingChunk], now: int
    ) -> list[int] | None:
        """Insert ``items`` as ``base + 1, ...``; ``None`` if all went in, else the stored sequences."""
        rows = [
            (stream_id, base + offset, item.run_id, item.step, item.chunk_type, item.body, item.dedupe_key, now)
            for offset, item in enumerate(items, start=1)
        ]
        if conn.exec_driver_sql(_SQLITE_INSERT_CHUNK, rows).rowcount == len(items):
            return None
        return [int(s) for s in conn.execute(_SEQUENCES_AFTER, {"sid": stream_id, "after": base}).scalars()]

    # readers ------------------------------------------------------------------------------------

    async def create_reader(self, stream_id: str) -> SqlStreamReader | None:
        """Return a live reader from the first stored chunk, or ``None`` for an unknown stream."""
        return await self.create_resumable_reader(stream_id)

    async def create_resumable_reader(self, stream_id: str, *, from_sequence: int = 0) -> SqlStreamReader | None:
        """Return a live reader of the chunks with a sequence above ``from_sequence``."""
        self._check_open()
        await self.flush()
        row = await asyncio.to_thread(self._load_row, stream_id)
        if row is None:
            return None
        return SqlStreamReader(self, stream_id, from_sequence, row)

    async def records(self, stream_id: str, after_sequence: int = 0) -> AsyncIterator[ChunkRecord]:
        """Follow the stream live from ``after_sequence``, yielding chunks with their sequences.

        For SSE: the sequence is the event id a client reconnects with. Yields nothing for an
        unknown stream; raises like a reader on a failed or truncated stream.
        """
        reader = await self.create_resumable_reader(stream_id, from_sequence=after_sequence)
        if reader is None:
            return
        try:
            while True:
                try:
                    record = await reader.next_record()
                except StopAsyncIteration:
                    return
                yield record
        finally:
            await reader.close()

    async def read_records(self, stream_id: str, after_sequence: int = 0) -> list[ChunkRecord]:
        """Return the stored chunks after ``after_sequence`` with their sequences (a snapshot)."""
        await self.flush()
        return await asyncio.to_thread(self._read_records, stream_id, after_sequence)

    # lifecycle ----------------------------------------------------------------------------------

    async def end_stream(self, stream_id: str, output: object = None) -> None:
        """Mark the stream ended after every chunk queued before; readers stop after the stored chunks.

        ``output`` is not kept: the session store owns the run's output.
        """
        await self._terminate(stream_id, "ended", None)

    async def fail_stream(self, stream_id: str, error: str) -> None:
        """Mark the stream failed; readers raise ``HelixError`` after the stored chunks."""
        await self._terminate(stream_id, "failed", error)

    async def _terminate(self, stream_id: str, status: StreamStatus, error: str | None) -> None:
        self._check_open()
        await self.flush()
        marker = self._committer.pending_loss_marker(stream_id)
        if marker is not None:  # chunks lost to an outage: say so before the end
            self._flusher.submit(marker)
            await self.flush()
        stored_error = None if error is None else codec.escape_text(error)
        params = {"sid": stream_id, "status": status, "error": stored_error, "now": now_ms()}
        await asyncio.to_thread(self._execute_write, _TERMINATE, params, notify=stream_id)
        self._set_local(stream_id, "ended")
        self._signals.bump(stream_id)

    async def cleanup_to_step(self, stream_id: str, step_count: int) -> None:
        """Remove chunks whose ``step`` is above ``step_count``; chunks without a step stay.

        Records the truncation marker, so attached readers everywhere that had not reached a removed
        chunk raise ``StreamTruncatedError`` on their next iteration.
        """
        self._check_open()
        await self.flush()
        if await asyncio.to_thread(self._cleanup, stream_id, step_count):
            self._signals.bump(stream_id, control=True)

    async def reset_stream(self, stream_id: str) -> None:
        """Remove every chunk, stop attached readers and make the stream active; sequences go on."""
        self._check_open()
        await self.flush()
        await asyncio.to_thread(self._reset, stream_id)
        self._set_local(stream_id, "active")
        self._signals.bump(stream_id, control=True)

    async def delete_stream(self, stream_id: str) -> None:
        """Delete the stream and its chunks (retention, session deletion); attached readers stop.

        Nothing expires on its own: streams live until deleted, so call this when their session goes.
        """
        self._check_open()
        await self.flush()
        await asyncio.to_thread(self._delete, stream_id)
        self._local_status.pop(stream_id, None)
        self._signals.bump(stream_id, control=True)

    async def get_stream_info(self, stream_id: str) -> StreamInfo | None:
        """Return the stream's status and counters (after queued chunks), or ``None`` if unknown."""
        await self.flush()
        return await asyncio.to_thread(self._info, stream_id)

    def close(self) -> None:
        """Commit queued chunks, stop the threads, stop readers and release connections.

        Blocks; from async code prefer :meth:`aclose`. The engine is disposed only if the manager
        created it.
        """
        if self._closed:
            return
        self._closed = True
        self._flusher.stop()
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        self._signals.bump_all(control=True)
        if self._owns_engine:
            self._engine.dispose()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop."""
        await asyncio.to_thread(self.close)

    # internals ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise HelixError("The stream manager is closed", code="transport_error", retryable=False)

    def _set_local(self, stream_id: str, status: str) -> None:
        if len(self._local_status) >= _LOCAL_STATUS_LIMIT:
            self._local_status.clear()  # a cache: losing it costs a round trip, not correctness
        self._local_status[stream_id] = status

    def _wait_timeout(self) -> float:
        return max(self.poll_interval, _LISTEN_SAFETY_POLL) if self.listening else self.poll_interval

    def _ensure_listener(self) -> None:
        if not self.notify or self._listener is not None or self._closed:
            return
        with self._listener_lock:
            if self._listener is not None or self._closed:
                return
            url = self._engine.url.set(drivername="postgresql")
            self._listener = _Listener(
                url.render_as_string(hide_password=False), self._on_notify, self._on_listen_state
            )
            self._listener.start()

    def _on_notify(self, payload: str) -> None:
        if payload == "*":
            self._signals.bump_all(control=True)
            return
        kind, _, stream_id = payload.partition(":")
        self._signals.bump(stream_id, control=kind == "x")

    def _on_listen_state(self) -> None:
        self._signals.bump_all()

    def _send_notify(self, conn: Connection, stream_id: str, *, control: bool) -> None:
        if not self.notify:
            return
        too_long = len(stream_id.encode()) > _MAX_NOTIFY_ID_BYTES
        payload = "*" if too_long else f"{'x' if control else 'c'}:{stream_id}"
        conn.execute(_NOTIFY, {"channel": NOTIFY_CHANNEL, "payload": payload})

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        with self._read_engine.connect() as conn:
            if self._is_postgres:
                yield conn
            else:
                with conn.begin():
                    yield conn

    @retrying
    def _execute_write(self, statement: sa.TextClause, params: dict[str, Any], *, notify: str | None = None) -> None:
        with _begin_write(self._engine) as conn:
            conn.execute(statement, params)
            if notify is not None:
                self._send_notify(conn, notify, control=False)

    @retrying
    def _load_row(self, stream_id: str) -> _StreamRow | None:
        with self._reading() as conn:
            row = conn.execute(_ROW, {"sid": stream_id}).first()
        return None if row is None else _StreamRow.from_row(row)

    @retrying
    def _read_page(self, stream_id: str, after: int) -> tuple[_StreamRow | None, list[ChunkRecord]]:
        with self._reading() as conn:
            rows = conn.execute(_PAGE, {"sid": stream_id, "after": after, "limit": _READ_PAGE}).all()
        if not rows:
            return None, []
        records = [
            ChunkRecord.model_construct(sequence=int(r[10]), chunk=_chunk_from_storage(r[11]))
            for r in rows
            if r[10] is not None
        ]
        return _StreamRow.from_row(rows[0]), records

    @retrying
    def _read_records(self, stream_id: str, after: int) -> list[ChunkRecord]:
        with self._reading() as conn:
            rows = conn.execute(_RECORDS, {"sid": stream_id, "after": after}).all()
        return [ChunkRecord.model_construct(sequence=int(r[0]), chunk=_chunk_from_storage(r[1])) for r in rows]

    @retrying
    def _info(self, stream_id: str) -> StreamInfo | None:
        with self._reading() as conn:
            row = conn.execute(_INFO, {"sid": stream_id}).first()
        if row is None:
            return None
        return StreamInfo(status=row[0], latest_sequence=int(row[1]), chunk_count=int(row[2]))

    @retrying
    def _cleanup(self, stream_id: str, step_count: int) -> bool:
        now = now_ms()
        with _begin_write(self._engine) as conn:
            # Lock the row first, as writers do: the same lock order everywhere.
            if conn.execute(_LOCK_STREAM, {"sid": stream_id, "now": now}).first() is None:
                return False
            removed = [
                int(s) for s in conn.execute(_DELETE_AFTER_STEP, {"sid": stream_id, "step": step_count}).scalars()
            ]
            if not removed:
                return False
            conn.execute(
                _MARK_TRUNCATED,
                {
                    "sid": stream_id,
                    "removed": len(removed),
                    "step": step_count,
                    "max_removed": max(removed),
                    "now": now,
                },
            )
            self._send_notify(conn, stream_id, control=True)
        return True

    @retrying
    def _delete(self, stream_id: str) -> None:
        with _begin_write(self._engine) as conn:
            conn.execute(_DELETE_STREAM, {"sid": stream_id})
            conn.execute(_DELETE_ALL, {"sid": stream_id})
            self._send_notify(conn, stream_id, control=True)

    @retrying
    def _reset(self, stream_id: str) -> None:
        with _begin_write(self._engine) as conn:
            conn.execute(_RESET, {"sid": stream_id, "now": now_ms()})
            conn.execute(_DELETE_ALL, {"sid": stream_id})
            self._send_notify(conn, stream_id, control=True)


def _ended_error(stream_id: str) -> HelixError:
    return HelixError(
        f"Stream {stream_id!r} has ended; create a new writer to start another turn",
        code="transport_error",
        retryable=False,
    )


if TYPE_CHECKING:
    # Checked by mypy only: the SQL manager must satisfy the protocol structurally.
    _conforms: StreamManager = SqlStreamManager("sqlite://")


def _chunk_from_storage(text: str) -> StreamChunk:
    """A stored chunk: its JSON, with the storage escape undone when it has one (``store.codec``)."""
    if codec.ESCAPE in text:
        return StreamChunkAdapter.validate_python(codec.loads(text))
    return chunk_from_json(text)
