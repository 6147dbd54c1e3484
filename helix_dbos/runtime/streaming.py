"""Stream writes from workflow threads, and reads from any event loop.

Stream managers are async. The agent workflow runs in DBOS worker threads and the LLM step's
callbacks run on the runtime's background loop, while readers (an HTTP handler, a test) await on
their own loops. :class:`RunStreams` runs every manager coroutine on the background loop, so one
set of asyncio primitives serves all of them, and gives readers an iterator that bridges back to
whatever loop they run on.

Chunks written from workflow code carry a deterministic ``(run_id, ordinal)`` so a durable
manager can drop the duplicates a replayed workflow would otherwise write twice.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from helix_dbos.errors import DatabaseUnavailableError
from helix_dbos.logger import Logger
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.backend import Backend
from helix_dbos.stream.base import ChunkRecord, ResumableStreamReader, StreamManager, StreamReader
from helix_dbos.stream.capabilities import HeldWrites, RecordReader, RollbackStream, StreamStartInTransaction
from helix_dbos.stream.chunks import StreamChunk


def _on_an_event_loop() -> bool:
    """Whether the calling thread is running an event loop (blocking it would stall its tasks)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class RunStreams:
    """Thread-safe facade over a :class:`StreamManager` bound to the background loop.

    ``backend``: what the manager offers beyond the base protocol, resolved by the executor with
    its store (resolved here from the manager alone when not given).
    """

    def __init__(self, manager: StreamManager, logger: Logger, backend: Backend | None = None) -> None:
        self.manager = manager
        self.backend = backend if backend is not None else Backend.resolve(manager)
        self._logger = logger
        self._hops = 0  # writes sent through the background loop and not done yet
        self._hops_lock = threading.Lock()

    async def write_async(self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None = None) -> None:
        """Write from code already running on the background loop (LLM callbacks).

        ``dedupe_key`` makes the manager store the chunk once even when a replayed workflow writes
        it again (``StreamManager.write_keyed``).
        """
        if chunk.timestamp is None:
            chunk = chunk.model_copy(update={"timestamp": int(time.time() * 1000)})
        if dedupe_key is not None:
            await self.manager.write_keyed(stream_id, chunk, dedupe_key, run_id=chunk.agent_id)
            return
        writer = await self.manager.create_writer(stream_id, chunk.agent_id, chunk.agent_type)
        await writer.write(chunk)

    def write(self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None = None) -> None:
        """Write from a workflow or step thread without waiting for the write.

        The background loop runs submitted writes in submission order, so chunks keep their order;
        not waiting keeps stream latency off the run's critical path. Failures are logged, never
        fatal to the run. :meth:`flush` waits for everything submitted so far.

        A keyed write to a manager that can queue from any thread (a ``QueueingStream``: the SQL
        manager, whose flusher thread does the I/O) is queued right here, without the hop to the
        background loop (the hop cost more CPU than the write), unless writes sent through the loop
        are still outstanding: then it follows them there, so order is kept either way.
        """
        queueing = self.backend.queueing
        if dedupe_key is not None and queueing is not None:
            with self._hops_lock:
                direct = self._hops == 0
            if direct:
                if chunk.timestamp is None:
                    chunk = chunk.model_copy(update={"timestamp": int(time.time() * 1000)})
                try:
                    queueing.enqueue_keyed(stream_id, chunk, dedupe_key, run_id=chunk.agent_id)
                except Exception as exc:
                    self._logger.warn("[helix-dbos] stream write failed", {"error": repr(exc)})
                return
        with self._hops_lock:
            self._hops += 1
        future = asyncio.run_coroutine_threadsafe(self.write_async(stream_id, chunk, dedupe_key), background_loop.loop)
        future.add_done_callback(self._hop_done)

    def hold(self, stream_id: str, engine: object) -> HeldWrites | None:
        """The stream's queued chunks, to store in a transaction on ``engine`` (a step commit's).

        ``None`` when the manager cannot (the in-memory one, another database) or when writes sent
        through the background loop are outstanding: they were written before the queued chunks
        may have been, and would then land after them.
        """
        stream = self.backend.transactional_stream
        if stream is None:
            return None
        with self._hops_lock:
            if self._hops:
                return None
        return stream.hold_for_transaction(stream_id, engine)

    def joint_start(self, stream_id: str, engine: object) -> StreamStartInTransaction | None:
        """The stream's start (first sequence, activation) to do in a store transaction on ``engine``.

        It replaces :meth:`latest_sequence` before and :meth:`open` after the store's start: one
        transaction for a run's start instead of three. ``None`` when the manager cannot (the
        in-memory one, another database) or writes sent through the background loop are
        outstanding; the caller then reads and opens the stream itself.
        """
        stream = self.backend.transactional_stream
        if stream is None:
            return None
        with self._hops_lock:
            if self._hops:
                return None
        return stream.start_for_transaction(stream_id, engine)

    def _hop_done(self, future: Any) -> None:
        with self._hops_lock:
            self._hops -= 1
        self._log_failure(future)

    def flush(self) -> None:
        """Wait until every write submitted before this call has been applied."""

        async def _noop() -> None:
            return None

        background_loop.run(_noop())

    def _log_failure(self, future: Any) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            self._logger.warn("[helix-dbos] stream write failed", {"error": repr(exc)})

    def open(self, stream_id: str, run_id: str, agent_type: str) -> None:
        """Create (or reactivate) the stream before a run starts, so readers can attach at once.

        The run's first sequence was read before its start was recorded (:meth:`latest_sequence`),
        so this reads nothing back: one write on a run's critical path, not a write and a read.
        """
        activation = self.backend.activation

        async def _open() -> None:
            if activation is not None:
                await activation.activate(stream_id)  # durable managers: never trust a per-process cache here
            await self.manager.create_writer(stream_id, run_id, agent_type)

        background_loop.run(_open())

    def stored_records(self, stream_id: str, after_sequence: int = 0) -> list[ChunkRecord]:
        """A snapshot of the stored chunks after ``after_sequence`` (waits for writes submitted before)."""
        return background_loop.run(self.manager.read_records(stream_id, after_sequence))

    def roll_back(self, stream_id: str, sequence: int, step_count: int, resync: StreamChunk, dedupe_key: str) -> None:
        """Remove every chunk after ``sequence``, then write ``resync`` (once per ``dedupe_key``), and wait.

        The stream must be open (a run's start opened it). A manager without
        :class:`~helix_dbos.stream.capabilities.RollbackStream` removes nothing; the chunk is still written.
        """
        manager = self.manager

        async def _roll_back() -> None:
            if isinstance(manager, RollbackStream):
                await manager.cleanup_after_sequence(stream_id, sequence, step_count)
            await self.write_async(stream_id, resync, dedupe_key)

        background_loop.run(_roll_back())

    def latest_sequence(self, stream_id: str) -> int:
        """The stream's latest sequence (0 for a stream that does not exist yet)."""

        async def _latest() -> int:
            info = await self.manager.get_stream_info(stream_id)
            return info.latest_sequence if info is not None else 0

        return background_loop.run(_latest())

    def end(self, stream_id: str, output: Any = None) -> None:
        """Mark the stream ended (the run finished), after every chunk written before."""
        self._terminate(stream_id, "ending", None, lambda: self.manager.end_stream(stream_id, output))

    def fail(self, stream_id: str, error: str) -> None:
        """Mark the stream failed."""
        self._terminate(stream_id, "failing", error, lambda: self.manager.fail_stream(stream_id, error))

    def _terminate(
        self, stream_id: str, what: str, error: str | None, call: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        """Run an end or fail until it lands: a reader of a finished run must always get its end.

        The manager retries transient errors for the store's bound; past it the database is still
        away, and this keeps waiting, as DBOS does for its own records (the run's completion cannot
        be recorded meanwhile either). Any other error is logged: the stream cannot be ended.

        A manager that ends streams from any thread (``ThreadEndingStream``, the SQL manager) is
        called right here (a workflow thread blocks for the statement, as it would for the hop),
        unless writes sent through the background loop are still outstanding, since the end must come
        after them, so it follows them there (as :meth:`write` does), or this thread runs an event
        loop, which must not block.
        """
        ending = self.backend.ending
        if ending is not None and not _on_an_event_loop():
            with self._hops_lock:
                direct = self._hops == 0
            if direct:
                self._until_it_lands(stream_id, what, lambda: ending.terminate_from_thread(stream_id, error))
                return
        self._until_it_lands(stream_id, what, lambda: background_loop.run(call()))

    def _until_it_lands(self, stream_id: str, what: str, attempt: Callable[[], None]) -> None:
        while True:
            try:
                attempt()
                return
            except DatabaseUnavailableError as exc:
                self._logger.warn(
                    f"[helix-dbos] {what} stream waits for the database", {"stream_id": stream_id, "error": exc.message}
                )
            except Exception as exc:
                self._logger.warn(f"[helix-dbos] {what} stream failed", {"stream_id": stream_id, "error": repr(exc)})
                return

    async def read(self, stream_id: str, *, from_sequence: int = 0) -> AsyncIterator[StreamChunk] | None:
        """An iterator over the stream usable on the caller's loop, or ``None`` for an unknown stream."""
        bg = background_loop.loop
        reader = await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(
                self.manager.create_resumable_reader(stream_id, from_sequence=from_sequence), bg
            )
        )
        if reader is None:
            return None
        return _bridge(reader, bg)

    async def records(self, stream_id: str, *, after_sequence: int = 0) -> AsyncIterator[ChunkRecord] | None:
        """Like :meth:`read`, but yields ``ChunkRecord(sequence, chunk)``: what SSE needs for event ids.

        Ends when the stream ends; raises ``HelixError`` (``transport_error``) after the chunks of a
        failed stream, and ``StreamTruncatedError`` when chunks the reader had not reached were removed.
        """
        bg = background_loop.loop
        reader = await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(
                self.manager.create_resumable_reader(stream_id, from_sequence=after_sequence), bg
            )
        )
        if reader is None:
            return None
        return _bridge_records(reader, bg)


async def _bridge_records(reader: ResumableStreamReader, loop: asyncio.AbstractEventLoop) -> AsyncIterator[ChunkRecord]:
    paired = reader if isinstance(reader, RecordReader) else None

    async def next_record() -> ChunkRecord:
        if paired is not None:
            return await paired.next_record()
        chunk = await reader.__anext__()
        return ChunkRecord(sequence=reader.current_sequence, chunk=chunk)

    try:
        while True:
            try:
                record = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(next_record(), loop))
            except StopAsyncIteration:
                return
            yield record
    finally:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(reader.close(), loop))


async def _bridge(reader: StreamReader, loop: asyncio.AbstractEventLoop) -> AsyncIterator[StreamChunk]:
    try:
        while True:
            try:
                chunk = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(reader.__anext__(), loop))
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(reader.close(), loop))
