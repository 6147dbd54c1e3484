"""The SQL stream manager: the async facade over storage, flusher, signals and the listener.

:class:`SqlStreamManager` owns the process-local parts of a durable stream (the flusher thread and
its queue, reader wake-ups, the ``LISTEN`` thread, a cache of what it did to each stream) and turns
every call into work for :class:`~helix_dbos.stream.sql.storage.StreamStorage` in a worker thread.
The design as a whole (batching, dedupe, wake-ups, truncation, caveats) is described in
:mod:`helix_dbos.stream.sql`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Final

from sqlalchemy import Connection, Engine

from helix_dbos.errors import HelixError
from helix_dbos.store import codec
from helix_dbos.store.dialect import RidingStart, RidingWrite
from helix_dbos.store.engine import create_engine_for, now_ms
from helix_dbos.store.migrate import check_migrated
from helix_dbos.store.retry import RetryPolicy
from helix_dbos.stream.base import ChunkRecord, StreamInfo, StreamStatus
from helix_dbos.stream.chunks import RunPausedChunk, RunResumedChunk, StreamChunk
from helix_dbos.stream.sql.flusher import BatchCommitter, Flusher, Hold, PendingChunk, storage_body
from helix_dbos.stream.sql.listen import Listener, dispatch
from helix_dbos.stream.sql.reader import ReaderHost, SqlStreamReader
from helix_dbos.stream.sql.signals import Signals
from helix_dbos.stream.sql.storage import StreamStorage, dialect_for
from helix_dbos.stream.sql.writer import SqlStreamWriter

if TYPE_CHECKING:
    from helix_dbos.stream.base import StreamManager

__all__ = ["HeldChunks", "SqlStreamManager", "StreamStart"]

_log = logging.getLogger(__name__)

_LISTEN_SAFETY_POLL: Final = 1.0
"""Seconds between a reader's queries while NOTIFY is live: a backstop, never the normal path."""
_LOCAL_STATUS_LIMIT: Final = 10_000
"""Entries of the local stream-status cache before it is dropped and rebuilt."""


class SqlStreamManager:
    """A :class:`~helix_dbos.stream.base.StreamManager` on PostgreSQL or SQLite.

    Streams survive restarts and are shared by every process on the database; see
    :mod:`helix_dbos.stream.sql` for the batching, dedupe, wake-up and truncation design. Semantics
    otherwise follow :class:`~helix_dbos.stream.memory.InMemoryStreamManager`.

    Args:
        database_url: ``postgresql://...`` or ``sqlite:///path``, or an engine you own (made with
            :func:`helix_dbos.store.engine.create_engine_for`; it is not disposed by :meth:`close`).
        poll_interval: Seconds between a waiting reader's queries when no NOTIFY can wake it.
        notify: On PostgreSQL, send ``NOTIFY`` with every write and wake readers by ``LISTEN``.
        batch_max_chunks: Most chunks committed in one transaction.
        batch_max_delay: Least seconds between two commit starts, unless a batch is full or a
            flush is waiting: the most a chunk waits for its commit to start. A chunk written after
            a quiet spell that long commits at once. ``0`` commits as soon as possible. The default,
            50 ms, is below what a reader notices and costs a run about two stream transactions
            where 20 ms cost five (``scripts/bench_overhead.py``).
        max_pending_chunks: Queued chunks above which ``write`` waits for the flusher.
        check_schema: Refuse to start on a database not migrated to this version.
        retry: How writes and reads retry transient database errors (default: ``RetryPolicy()``,
            120 s; ``launch()`` passes its settings' policy; see ``helix_dbos.store.retry``).
    """

    def __init__(
        self,
        database_url: str | Engine,
        *,
        poll_interval: float = 0.05,
        notify: bool = True,
        batch_max_chunks: int = 64,
        batch_max_delay: float = 0.05,
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
        if check_schema:
            try:
                check_migrated(self._engine, self._engine.url.render_as_string(hide_password=False))
            except BaseException:
                if self._owns_engine:
                    self._engine.dispose()
                raise
        dialect = dialect_for(self._engine, notify=notify)
        self.poll_interval = poll_interval
        self.notify = dialect.notify
        self._max_pending = max_pending_chunks
        self._signals = Signals()
        self._retry = retry if retry is not None else RetryPolicy()
        self._storage = StreamStorage(dialect, self._retry)
        self._committer = BatchCommitter(self._storage.write_groups, self._retry)
        self._flusher = Flusher(
            self._commit_batch, max_chunks=batch_max_chunks, max_delay=batch_max_delay, name="helix-stream-flusher"
        )
        self._reader_host = ReaderHost(
            signals=self._signals,
            read_page=self._storage.read_page,
            wait_timeout=self._wait_timeout,
            is_closed=lambda: self._closed,
        )
        self._listener: Listener | None = None
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
            await self._flush_stream(stream_id)  # queued chunks of the previous turn go before its end
            await asyncio.to_thread(self._storage.activate, stream_id)
            self._set_local(stream_id, "active")
        return SqlStreamWriter(self._enqueue, self.flush, stream_id, run_id, agent_type)

    async def activate(self, stream_id: str) -> None:
        """Make the stream active in the database whatever this manager has cached.

        A run's start calls this: another process may have ended or failed the stream (an abort sent
        to an API process, a run finished on another worker) while this manager still caches it as
        active, and ``create_writer`` trusts the cache.
        """
        self._check_open()
        await self._flush_stream(stream_id)
        await asyncio.to_thread(self._storage.activate, stream_id)
        self._set_local(stream_id, "active")

    async def write_keyed(
        self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None, *, run_id: str | None = None
    ) -> None:
        """Queue ``chunk`` without a writer, stored once per ``dedupe_key``.

        Creates the stream if it does not exist; raises ``HelixError`` at once if this manager
        ended it. A failure at commit time is logged (a writer's ``write`` would report it).
        """
        self._check_open()
        await self._enqueue(stream_id, chunk, dedupe_key=dedupe_key, run_id=run_id, on_failure=None)

    async def flush(self) -> None:
        """Wait until every chunk queued so far (by any writer of this manager) is committed."""
        await asyncio.wrap_future(self._flusher.barrier())

    async def _flush_stream(self, stream_id: str) -> None:
        """Wait until every chunk of ``stream_id`` queued so far is committed (at once if none is)."""
        await asyncio.wrap_future(self._flusher.barrier(stream_id))

    def enqueue_keyed(
        self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None, *, run_id: str | None = None
    ) -> None:
        """:meth:`write_keyed` for a thread outside any event loop (a workflow or step thread).

        Queueing never waits for the database, so a workflow thread need not hop to an event loop
        to do it (the hop cost more CPU than the write). Blocks only for back-pressure, when more
        than ``max_pending_chunks`` are queued.
        """
        self._check_open()
        if self._queue(stream_id, chunk, dedupe_key=dedupe_key, run_id=run_id, on_failure=None):
            self._flusher.barrier().result()

    def hold_for_transaction(self, stream_id: str, engine: object) -> HeldChunks | None:
        """Take ``stream_id``'s queued chunks to store in a transaction of the caller's on ``engine``.

        A run's step commit stores the chunks its workflow wrote since the previous commit this way,
        so they cost no transaction of their own. ``None`` when that cannot be done safely: another
        engine, chunks of the stream already being committed, a flush waiting, chunks lost to an
        outage still to be reported. The caller must store them inside its transaction
        (:meth:`HeldChunks.write`, or :meth:`HeldChunks.for_commit` for a step commit) and call
        :meth:`HeldChunks.release` after it, committed or not; chunks not stored go
        back to the flusher. Chunks the stream gets meanwhile wait for the release, so order holds.
        """
        if engine is not self._engine or self._closed or self._committer.has_loss(stream_id):
            return None
        hold = self._flusher.take(stream_id)
        return None if hold is None else HeldChunks(self, hold)

    def start_for_transaction(self, stream_id: str, engine: object) -> StreamStart | None:
        """A run's start of ``stream_id`` (latest sequence, activation) for a transaction of the caller's.

        The store's ``start_run_with`` reads the run's first sequence and activates the stream in
        its own transaction, so starting a run costs no stream transaction of its own. ``None``
        when that cannot be done (another engine, a closed manager, a loss still to report); the
        caller then uses :meth:`get_stream_info` and :meth:`activate`. Queued chunks of the stream
        are committed first, as :meth:`activate` does: the previous turn's chunks go before.
        """
        if engine is not self._engine or self._closed or self._committer.has_loss(stream_id):
            return None
        self._flusher.barrier(stream_id).result()
        return StreamStart(self, stream_id)

    async def _enqueue(
        self,
        stream_id: str,
        chunk: StreamChunk,
        *,
        dedupe_key: str | None,
        run_id: str | None,
        on_failure: Callable[[HelixError], None] | None,
    ) -> None:
        if self._queue(stream_id, chunk, dedupe_key=dedupe_key, run_id=run_id, on_failure=on_failure):
            await self.flush()

    def _queue(
        self,
        stream_id: str,
        chunk: StreamChunk,
        *,
        dedupe_key: str | None,
        run_id: str | None,
        on_failure: Callable[[HelixError], None] | None,
    ) -> bool:
        """Hand ``chunk`` to the flusher; ``True`` when the queue is over its bound (wait for it)."""
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
            on_failure=on_failure,
        )
        return self._flusher.submit(pending) > self._max_pending

    def _commit_batch(self, batch: list[PendingChunk]) -> None:
        """Store ``batch`` (runs on the flusher thread; ``sql.flusher`` says what happens on errors)."""
        outcome = self._committer.commit(batch)
        for stream_id, items in outcome.ended.items():
            self._refused(stream_id, items)
        for stream_id in outcome.stored:
            self._signals.bump(stream_id)

    def _refused(self, stream_id: str, items: list[PendingChunk]) -> None:
        """Chunks the stream refused because it had ended: tell their writers, cache the end."""
        self._set_local(stream_id, "ended")
        error = _ended_error(stream_id)
        _log.warning("stream flusher: dropped %d chunk(s): %s", len(items), error.message)
        for item in items:
            if item.on_failure is not None:
                item.on_failure(error)

    # readers ------------------------------------------------------------------------------------

    async def create_reader(self, stream_id: str) -> SqlStreamReader | None:
        """Return a live reader from the first stored chunk, or ``None`` for an unknown stream."""
        return await self.create_resumable_reader(stream_id)

    async def create_resumable_reader(self, stream_id: str, *, from_sequence: int = 0) -> SqlStreamReader | None:
        """Return a live reader of the chunks with a sequence above ``from_sequence``."""
        self._check_open()
        await self._flush_stream(stream_id)
        row = await asyncio.to_thread(self._storage.load_row, stream_id)
        if row is None:
            return None
        reader = SqlStreamReader(self._reader_host, stream_id, from_sequence, row)
        self._ensure_listener()
        return reader

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
        await self._flush_stream(stream_id)
        return await asyncio.to_thread(self._storage.read_records, stream_id, after_sequence)

    # lifecycle ----------------------------------------------------------------------------------

    async def end_stream(self, stream_id: str, output: object = None) -> None:
        """Mark the stream ended after every chunk queued before; readers stop after the stored chunks.

        ``output`` is not kept: the session store owns the run's output.
        """
        await self._terminate(stream_id, "ended", None)

    async def fail_stream(self, stream_id: str, error: str) -> None:
        """Mark the stream failed; readers raise ``HelixError`` after the stored chunks."""
        await self._terminate(stream_id, "failed", error)

    def terminate_from_thread(self, stream_id: str, error: str | None = None) -> None:
        """:meth:`end_stream` (``error`` ``None``) or :meth:`fail_stream` from a thread outside any event loop.

        Blocks until the end is stored, after every chunk queued before it. A workflow thread ending
        its run's stream calls this directly: through the runtime's loop, which hands the statement
        to a worker thread, the one statement would cost two thread hand-offs more.
        """
        self._terminate_blocking(stream_id, "ended" if error is None else "failed", error)

    async def _terminate(self, stream_id: str, status: StreamStatus, error: str | None) -> None:
        await asyncio.to_thread(self._terminate_blocking, stream_id, status, error)

    def _terminate_blocking(self, stream_id: str, status: StreamStatus, error: str | None) -> None:
        self._check_open()
        stored_error = None if error is None else codec.escape_text(error)
        held = self.hold_for_transaction(stream_id, self._engine)
        if held is not None:  # the stream's last chunks and its end in one transaction
            try:
                if not len(held):  # no chunks: the end alone, one statement
                    self._storage.terminate(stream_id, status, stored_error)
                elif not held.end_alone(status, stored_error):  # one statement for both, where it can be
                    self._storage.terminate(stream_id, status, stored_error, held.write)
            except BaseException:
                held.release(stored=False)  # back to the flusher; the end is written below, after them
            else:
                held.release(stored=True)
                self._set_local(stream_id, "ended")
                self._signals.bump(stream_id)
                return
        self._flusher.barrier(stream_id).result()
        marker = self._committer.pending_loss_marker(stream_id)
        if marker is not None:  # chunks lost to an outage: say so before the end
            self._flusher.submit(marker)
            self._flusher.barrier(stream_id).result()
        self._storage.terminate(stream_id, status, stored_error)
        self._set_local(stream_id, "ended")
        self._signals.bump(stream_id)

    async def cleanup_to_step(self, stream_id: str, step_count: int) -> None:
        """Remove chunks whose ``step`` is above ``step_count``; chunks without a step stay.

        Records the truncation marker, so attached readers everywhere that had not reached a removed
        chunk raise ``StreamTruncatedError`` on their next iteration.
        """
        self._check_open()
        await self._flush_stream(stream_id)
        if await asyncio.to_thread(self._storage.cleanup, stream_id, step_count):
            self._signals.bump(stream_id, control=True)

    async def cleanup_after_sequence(self, stream_id: str, sequence: int, step_count: int) -> None:
        """Remove every chunk after ``sequence`` (a rollback to a checkpoint), as ``cleanup_to_step`` does.

        Attached readers that had not reached a removed chunk raise ``StreamTruncatedError``
        (``truncated_at_step=step_count``) on their next iteration.
        """
        self._check_open()
        await self._flush_stream(stream_id)
        if await asyncio.to_thread(self._storage.cleanup_after, stream_id, sequence, step_count):
            self._signals.bump(stream_id, control=True)

    async def reset_stream(self, stream_id: str) -> None:
        """Remove every chunk, stop attached readers and make the stream active; sequences go on."""
        self._check_open()
        await self._flush_stream(stream_id)
        await asyncio.to_thread(self._storage.reset, stream_id)
        self._set_local(stream_id, "active")
        self._signals.bump(stream_id, control=True)

    async def delete_stream(self, stream_id: str) -> None:
        """Delete the stream and its chunks (retention, session deletion); attached readers stop.

        Nothing expires on its own: streams live until deleted, so call this when their session goes.
        """
        self._check_open()
        await self._flush_stream(stream_id)
        await asyncio.to_thread(self._storage.delete, stream_id)
        self._local_status.pop(stream_id, None)
        self._signals.bump(stream_id, control=True)

    async def get_stream_info(self, stream_id: str) -> StreamInfo | None:
        """Return the stream's status and counters (after queued chunks), or ``None`` if unknown."""
        await self._flush_stream(stream_id)
        return await asyncio.to_thread(self._storage.info, stream_id)

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
            self._listener = self._storage.dialect.listener(self._on_notify, self._signals.bump_all)
            if self._listener is not None:
                self._listener.start()

    def _on_notify(self, payload: str) -> None:
        dispatch(payload, self._signals)


class HeldChunks:
    """A stream's queued chunks, stored in another writer's transaction (``hold_for_transaction``)."""

    def __init__(self, manager: SqlStreamManager, hold: Hold) -> None:
        self._manager = manager
        self._hold = hold
        self._ended = False

    def __len__(self) -> int:
        return len(self._hold.items)

    def write(self, conn: Connection) -> None:
        """Store the chunks through ``conn`` (inside the caller's transaction; again if it is retried)."""
        items = self._hold.items
        if items:
            self._appended(self._manager._storage.append(conn, self._hold.stream_id, items, now_ms()))

    def end_alone(self, status: StreamStatus, stored_error: str | None) -> bool:
        """Store the chunks and the stream's end in one statement of their own, where the database can.

        ``False`` having written nothing when it cannot: the caller ends the stream in a transaction
        with :meth:`write` first.
        """
        storage, hold = self._manager._storage, self._hold
        done = storage.end_with_chunks_alone(hold.stream_id, hold.items, status, stored_error)
        if done:
            self._appended(True)
        return done

    def for_commit(self) -> Callable[[Connection], None] | RidingWrite | None:
        """The writes to hand a step commit (``commit_step_with``); ``None`` when no chunk is held.

        Riding in the commit's own statement where the database can (PostgreSQL: one round trip for
        the step and its chunks), else :meth:`write`.
        """
        items = self._hold.items
        if not items:
            return None
        riding = self._manager._storage.riding_append(self._hold.stream_id, items, now_ms(), self._appended)
        return self.write if riding is None else riding

    def _appended(self, stored: bool) -> None:
        self._ended = not stored

    def release(self, *, stored: bool) -> None:
        """After the caller's transaction: ``stored`` if it committed with the chunks' writes in it."""
        manager, hold = self._manager, self._hold
        manager._flusher.release(hold, stored=stored)
        if not stored or not hold.items:
            return
        if self._ended:
            manager._refused(hold.stream_id, hold.items)
        else:
            manager._signals.bump(hold.stream_id)


class StreamStart:
    """A run's start of one stream, done inside another writer's transaction (``start_for_transaction``)."""

    def __init__(self, manager: SqlStreamManager, stream_id: str) -> None:
        self._manager = manager
        self.stream_id = stream_id

    def latest_sequence(self, conn: Connection) -> int:
        """The stream's latest sequence, read through ``conn`` (0 for a new stream)."""
        return self._manager._storage.latest_sequence_in(conn, self.stream_id)

    def activate(self, conn: Connection) -> None:
        """Create the stream or make it active, through ``conn`` (again if the caller retries)."""
        self._manager._storage.activate_in(conn, self.stream_id)

    def activated(self) -> None:
        """After the caller's transaction committed with :meth:`activate` in it."""
        self._manager._set_local(self.stream_id, "active")

    def riding(self) -> RidingStart | None:
        """:meth:`latest_sequence` and :meth:`activate` as SQL for the store's one statement (PostgreSQL)."""
        return self._manager._storage.riding_start(self.stream_id)


def _ended_error(stream_id: str) -> HelixError:
    return HelixError(
        f"Stream {stream_id!r} has ended; create a new writer to start another turn",
        code="transport_error",
        retryable=False,
    )


if TYPE_CHECKING:
    # Checked by mypy only: the SQL manager must satisfy the protocol structurally.
    _conforms: StreamManager = SqlStreamManager("sqlite://")
