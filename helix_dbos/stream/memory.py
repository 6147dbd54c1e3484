"""The in-memory stream manager: streams in process memory, for development and tests.

It implements the protocols of :mod:`helix_dbos.stream.base` with asyncio primitives of one event
loop and nothing durable; :mod:`helix_dbos.stream.sql` is the durable one. Its behaviour is the
reference: ``tests/stream/test_stream_manager_contract.py`` holds both managers to one suite.

Lifecycle of a stream in :class:`InMemoryStreamManager`::

    create_writer / first write ──► active ◄──────────── create_writer, reset_stream
                                      │  ▲ run_resumed chunk                │
                        run_paused    ▼  │                                  │
                        chunk ──────► paused                                │
                                      │                                     │
                  end_stream ─────────┴──► ended / failed ──────────────────┘

One session reuses one stream across turns, so an ended stream is reactivated by the next turn's
``create_writer``; readers attached before it ended still finish at the end they saw.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from helix_dbos.errors import HelixError, StreamTruncatedError
from helix_dbos.stream.base import (
    ChunkRecord,
    ResumableStreamReader,
    StreamInfo,
    StreamManager,
    StreamReader,
    StreamStatus,
    StreamWriter,
)
from helix_dbos.stream.chunks import RunPausedChunk, RunResumedChunk, StreamChunk

__all__ = ["InMemoryStreamManager"]


@dataclass(frozen=True)
class _Terminal:
    """Where a stream ended, as seen by a reader: yield up to ``after_sequence``, then stop."""

    after_sequence: int
    error: str | None = None


@dataclass(eq=False)
class _Stream:
    stream_id: str
    status: StreamStatus = "active"
    records: list[ChunkRecord] = field(default_factory=list)
    latest_sequence: int = 0
    terminal: _Terminal | None = None
    readers: set[_InMemoryStreamReader] = field(default_factory=set)
    keyed: dict[str, int] = field(default_factory=dict)
    """``write_keyed``'s dedupe keys of the stored chunks, with their sequences."""
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    """Notified on every change; readers wait on it for new chunks or an end."""

    def next_after(self, sequence: int) -> ChunkRecord | None:
        """Return the first stored record with a sequence greater than ``sequence``."""
        index = bisect.bisect_right(self.records, sequence, key=lambda record: record.sequence)
        return self.records[index] if index < len(self.records) else None

    async def notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()


class _InMemoryStreamWriter:
    """A :class:`StreamWriter` appending to an :class:`InMemoryStreamManager` stream."""

    def __init__(self, manager: InMemoryStreamManager, stream_id: str, run_id: str, agent_type: str) -> None:
        self._manager = manager
        self._closed = False
        self.stream_id = stream_id
        self.run_id = run_id
        self.agent_type = agent_type

    async def write(self, chunk: StreamChunk) -> None:
        """Append ``chunk``; raises ``HelixError`` if this writer is closed or the stream has ended."""
        if self._closed:
            raise HelixError(f"Writer for stream {self.stream_id!r} is closed", code="transport_error", retryable=False)
        await self._manager._append(self.stream_id, chunk)

    async def close(self) -> None:
        """Close this writer only; the stream and its readers are unaffected."""
        self._closed = True


class _InMemoryStreamReader:
    """A :class:`ResumableStreamReader` over an :class:`InMemoryStreamManager` stream."""

    def __init__(self, stream: _Stream, from_sequence: int) -> None:
        self._stream = stream
        self._cursor = from_sequence
        # A reader attached to an ended stream yields what is stored and stops, even if a later turn
        # reactivates the stream before it got there.
        self._terminal: _Terminal | None = stream.terminal
        self._truncation: StreamTruncatedError | None = None
        self._done = False
        stream.readers.add(self)

    @property
    def current_sequence(self) -> int:
        """Sequence of the last chunk yielded (the start position before the first one)."""
        return self._cursor

    @property
    def total_chunks(self) -> int:
        """Chunks currently stored in the stream."""
        return len(self._stream.records)

    @property
    def latest_sequence(self) -> int:
        """Highest sequence number assigned in the stream so far."""
        return self._stream.latest_sequence

    def __aiter__(self) -> _InMemoryStreamReader:
        """Return the reader itself: it is consumed once."""
        return self

    async def __anext__(self) -> StreamChunk:
        """Return the next chunk, waiting while the stream is open and has nothing new."""
        stream = self._stream
        async with stream.changed:
            while True:
                if self._done:
                    raise StopAsyncIteration
                if self._truncation is not None:
                    error, self._truncation = self._truncation, None
                    self._finish()
                    raise error
                record = stream.next_after(self._cursor)
                terminal = self._terminal
                if record is not None and (terminal is None or record.sequence <= terminal.after_sequence):
                    self._cursor = record.sequence
                    return record.chunk.model_copy(deep=True)
                if terminal is not None:
                    self._finish()
                    if terminal.error is not None:
                        raise HelixError(terminal.error, code="transport_error", retryable=False)
                    raise StopAsyncIteration
                await stream.changed.wait()

    async def close(self) -> None:
        """Detach from the stream and wake a pending ``__anext__`` so it stops."""
        self._finish()
        await self._stream.notify()

    def _finish(self) -> None:
        self._done = True
        self._stream.readers.discard(self)

    def _on_end(self, terminal: _Terminal) -> None:
        if self._terminal is None:
            self._terminal = terminal

    def _on_removed(self, removed: list[ChunkRecord], step_count: int) -> None:
        """Arm a ``StreamTruncatedError`` if a removed chunk was still ahead of this reader."""
        if self._truncation is not None:
            return
        limit = self._terminal.after_sequence if self._terminal is not None else None
        if any(r.sequence > self._cursor and (limit is None or r.sequence <= limit) for r in removed):
            self._truncation = StreamTruncatedError(
                self._stream.stream_id, self._cursor, step_count, self._stream.latest_sequence
            )


class InMemoryStreamManager:
    """A :class:`StreamManager` keeping streams in process memory, for development and tests.

    Streams are lost when the process exits and are not shared between processes. All methods must
    be called from one event loop. Decisions beyond the seeds' interface:

    - ``create_writer``, ``end_stream`` and ``fail_stream`` create an unknown stream, so a client
      attaching after a run failed before writing anything sees the failure rather than ``None``.
    - Writing to an ended or failed stream raises ``HelixError`` (``transport_error``); the next
      ``create_writer`` or ``reset_stream`` reactivates it (one stream serves every turn of a
      session). Readers attached before the end still finish at that end.
    - A ``run_paused`` chunk sets the status to ``paused`` and a ``run_resumed`` chunk (or the next
      ``create_writer``) back to ``active``; readers keep waiting through a pause.
    - A failed stream makes its readers raise ``HelixError(code="transport_error")`` with the failure
      message, after they yielded every stored chunk.
    - ``cleanup_to_step`` surfaces G4: a reader that had not yet yielded a removed chunk raises
      ``StreamTruncatedError`` (``last_valid_sequence`` = its last yielded sequence) on its next
      iteration, then stops; re-attach with ``create_resumable_reader(from_sequence=...)`` to read
      the survivors. Other readers go on and see every surviving chunk.
    - ``reset_stream`` detaches every attached reader (their iteration stops); sequence numbers keep
      counting up, so a client reconnecting with its last sequence reads only new chunks.
    - ``end_stream``'s ``output`` is not kept: the session store owns the run's output.
    - Chunks are copied on write and on read, so neither side can mutate what the other holds.
    """

    def __init__(self) -> None:
        self._streams: dict[str, _Stream] = {}

    def _get_or_create(self, stream_id: str) -> _Stream:
        stream = self._streams.get(stream_id)
        if stream is None:
            stream = self._streams[stream_id] = _Stream(stream_id)
        return stream

    async def create_writer(self, stream_id: str, run_id: str, agent_type: str) -> StreamWriter:
        """Return a writer, creating the stream or reactivating it if it ended, failed or paused."""
        stream = self._get_or_create(stream_id)
        stream.status = "active"
        stream.terminal = None
        return _InMemoryStreamWriter(self, stream_id, run_id, agent_type)

    async def write_keyed(
        self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None, *, run_id: str | None = None
    ) -> None:
        """Append ``chunk`` unless a stored chunk of the stream has ``dedupe_key`` (replay writes it again).

        Creates an unknown stream; raises ``HelixError`` on an ended or failed one, as a writer does.
        """
        await self._append(stream_id, chunk, dedupe_key)

    async def _append(self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None = None) -> None:
        stream = self._get_or_create(stream_id)
        if stream.status in ("ended", "failed"):
            raise HelixError(
                f"Stream {stream_id!r} is {stream.status}; create a new writer to start another turn",
                code="transport_error",
                retryable=False,
            )
        # Sequence assignment and append happen with no await in between, so concurrent writers on
        # one event loop get a total order that matches the stored order.
        if dedupe_key is not None and dedupe_key in stream.keyed:
            return
        stream.latest_sequence += 1
        if dedupe_key is not None:
            stream.keyed[dedupe_key] = stream.latest_sequence
        stream.records.append(ChunkRecord(sequence=stream.latest_sequence, chunk=chunk.model_copy(deep=True)))
        if isinstance(chunk, RunPausedChunk):
            stream.status = "paused"
        elif isinstance(chunk, RunResumedChunk):
            stream.status = "active"
        await stream.notify()

    async def create_reader(self, stream_id: str) -> StreamReader | None:
        """Return a live reader from the first stored chunk, or ``None`` for an unknown stream."""
        return await self.create_resumable_reader(stream_id)

    async def create_resumable_reader(self, stream_id: str, *, from_sequence: int = 0) -> ResumableStreamReader | None:
        """Return a live reader of the chunks with a sequence above ``from_sequence``."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return None
        return _InMemoryStreamReader(stream, from_sequence)

    async def end_stream(self, stream_id: str, output: object = None) -> None:
        """Mark the stream ended; attached readers stop after the chunks stored so far."""
        await self._terminate(stream_id, "ended", None)

    async def fail_stream(self, stream_id: str, error: str) -> None:
        """Mark the stream failed; attached readers raise ``HelixError`` after the stored chunks."""
        await self._terminate(stream_id, "failed", error)

    async def _terminate(self, stream_id: str, status: StreamStatus, error: str | None) -> None:
        stream = self._get_or_create(stream_id)
        stream.status = status
        stream.terminal = _Terminal(after_sequence=stream.latest_sequence, error=error)
        for reader in stream.readers:
            reader._on_end(stream.terminal)
        await stream.notify()

    async def cleanup_to_step(self, stream_id: str, step_count: int) -> None:
        """Remove chunks whose ``step`` is above ``step_count``; chunks without a step stay."""
        await self._remove(stream_id, step_count, lambda r: r.chunk.step is not None and r.chunk.step > step_count)

    async def cleanup_after_sequence(self, stream_id: str, sequence: int, step_count: int) -> None:
        """Remove every chunk after ``sequence`` (a rollback to a checkpoint), as ``cleanup_to_step`` does."""
        await self._remove(stream_id, step_count, lambda r: r.sequence > sequence)

    async def _remove(self, stream_id: str, step_count: int, doomed: Callable[[ChunkRecord], bool]) -> None:
        """Remove the records ``doomed`` picks; readers that had not reached one raise on their next read."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        kept: list[ChunkRecord] = []
        removed: list[ChunkRecord] = []
        for record in stream.records:
            (removed if doomed(record) else kept).append(record)
        if not removed:
            return
        stream.records = kept
        gone = {record.sequence for record in removed}
        stream.keyed = {key: seq for key, seq in stream.keyed.items() if seq not in gone}
        for reader in stream.readers:
            reader._on_removed(removed, step_count)
        await stream.notify()

    async def reset_stream(self, stream_id: str) -> None:
        """Remove every chunk, detach attached readers and make the stream active again."""
        stream = self._get_or_create(stream_id)
        stream.records = []
        stream.keyed = {}
        stream.status = "active"
        stream.terminal = None
        for reader in list(stream.readers):
            reader._finish()
        await stream.notify()

    async def get_stream_info(self, stream_id: str) -> StreamInfo | None:
        """Return the stream's status and counters, or ``None`` for an unknown stream."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return None
        return StreamInfo(status=stream.status, latest_sequence=stream.latest_sequence, chunk_count=len(stream.records))

    async def read_records(self, stream_id: str, after_sequence: int = 0) -> list[ChunkRecord]:
        """Return copies of the stored chunks after ``after_sequence`` with their sequence numbers.

        A non-blocking snapshot (empty for an unknown stream), for tests and for SSE event ids.
        """
        stream = self._streams.get(stream_id)
        if stream is None:
            return []
        return [record.model_copy(deep=True) for record in stream.records if record.sequence > after_sequence]


if TYPE_CHECKING:
    # Checked by mypy only: the in-memory manager must satisfy the protocol structurally.
    _conforms: StreamManager = InMemoryStreamManager()
