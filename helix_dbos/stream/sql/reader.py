"""The SQL stream reader: one query per wake-up, then a wait for the stream's next change.

A reader runs one query per wake-up: the stream row joined with the next page of chunks after its
cursor, one statement and so one snapshot, so the truncation marker, the end marker and the chunks
it sees agree. It then parks on its stream's :class:`~helix_dbos.stream.sql.signals.Signal` until a
write, a ``NOTIFY`` or the poll interval wakes it.

Ends and truncation as a reader sees them: a reader attached to an ended stream stops at that end
even if a new turn reactivates the stream (it takes ``end_sequence`` as its end when it sees
``activation`` move). A cleanup that removed a chunk still ahead of its cursor raises
:class:`~helix_dbos.errors.StreamTruncatedError` (exact for one cleanup between two of its
queries; after several it raises whenever its cursor is below the last cleanup's high-water mark,
which errs towards a reconnect).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from helix_dbos.errors import HelixError, StreamTruncatedError
from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import StreamChunk
from helix_dbos.stream.sql.queries import TERMINAL, StreamRow
from helix_dbos.stream.sql.signals import Signals, Waiter


@dataclass(frozen=True, slots=True)
class ReaderHost:
    """What a reader needs from its manager, handed over so it touches none of the manager's internals."""

    signals: Signals
    read_page: Callable[[str, int], tuple[StreamRow | None, list[ChunkRecord]]]
    """``StreamStorage.read_page``: blocking, run in a worker thread."""
    wait_timeout: Callable[[], float]
    """Seconds a parked reader waits before it queries anyway (short while NOTIFY is down)."""
    is_closed: Callable[[], bool]
    """Whether the manager was closed: readers stop then."""


@dataclass(frozen=True, slots=True)
class _Terminal:
    after_sequence: int
    error: str | None


class SqlStreamReader:
    """A live :class:`~helix_dbos.stream.base.ResumableStreamReader` over a stored stream.

    Use it from one task at a time. ``total_chunks`` and ``latest_sequence`` are as of the reader's
    last query. :meth:`next_record` gives the sequence with each chunk (the SSE event id).
    """

    def __init__(self, host: ReaderHost, stream_id: str, from_sequence: int, row: StreamRow) -> None:
        self._host = host
        self.stream_id = stream_id
        self._cursor = from_sequence
        self._activation = row.activation
        self._truncation_epoch = row.truncation_epoch
        # A reader attached to an ended stream stops at that end even if a new turn starts.
        self._terminal: _Terminal | None = (
            _Terminal(row.end_sequence or 0, row.error) if row.status in TERMINAL else None
        )
        self._latest = row.latest_sequence
        self._total = row.chunk_count
        self._buffer: deque[ChunkRecord] = deque()
        self._buffer_control = 0
        self._done = False
        self._waiter: Waiter | None = None
        self._signal = host.signals.attach(stream_id)

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
        host = self._host
        signal = self._signal
        while True:
            if self._done or host.is_closed():
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
            row, records = await asyncio.to_thread(host.read_page, self.stream_id, self._cursor)
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
            await self._wait(seen_data)

    async def close(self) -> None:
        """Detach from the stream and wake a pending ``__anext__`` so it stops."""
        self._finish()
        waiter = self._waiter
        if waiter is not None:
            waiter.wake()

    async def _wait(self, seen: int) -> None:
        """Return when the stream changed after ``seen``, the reader closes, or after the timeout."""
        signals = self._host.signals
        waiter = signals.park(self._signal, seen)
        if waiter is None:
            return
        self._waiter = waiter
        try:
            if not self._done:
                await asyncio.wait([waiter.future], timeout=self._host.wait_timeout())
        finally:
            self._waiter = None
            signals.unpark(self._signal, waiter)

    def _apply(self, row: StreamRow) -> None:
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
                raise StreamTruncatedError(
                    self.stream_id, self._cursor, row.truncated_at_step or 0, row.truncation_sequence
                )
            self._truncation_epoch = row.truncation_epoch
        if self._terminal is None and (row.activation != self._activation or row.status in TERMINAL):
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
            self._host.signals.detach(self.stream_id)
