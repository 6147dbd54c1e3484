"""Stream manager interfaces: what a run writes its chunks through and what a client reads.

The interfaces mirror seed 002 "StreamManager": a :class:`StreamManager` hands out
:class:`StreamWriter` s (one per run) and :class:`StreamReader` s (one per consumer, for example an
SSE connection). Readers are *live*: they yield the chunks already stored, then wait for new ones,
and finish when the stream ends. A :class:`ResumableStreamReader` starts after a given sequence
number, which is how a client reconnects (SSE ``Last-Event-ID``) without replaying what it saw.

Every stored chunk gets a per-stream sequence number, starting at 1 and never reused, not even after
:meth:`~StreamManager.cleanup_to_step` or :meth:`~StreamManager.reset_stream` removed chunks. Readers
track their position by sequence number, never by list index, so removing chunks cannot make a reader
skip a surviving chunk (the cursor-rebase bug described in seed 001).

This module holds protocols and records only, so that it imports no implementation:
:mod:`helix_dbos.stream.memory` (one process, for development and tests) and
:mod:`helix_dbos.stream.sql` (durable, PostgreSQL or SQLite) implement them, and
``tests/stream/test_stream_manager_contract.py`` runs one suite over all of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from helix_dbos.stream.chunks import StreamChunk

__all__ = [
    "ChunkRecord",
    "ResumableStreamReader",
    "StreamInfo",
    "StreamManager",
    "StreamReader",
    "StreamStatus",
    "StreamWriter",
]

StreamStatus = Literal["active", "paused", "ended", "failed"]
"""Status of a stream (the seeds' ``ResumableStreamStatus``; note ``ended``, not ``completed``)."""


class StreamInfo(BaseModel):
    """A snapshot of a stream's state, for session snapshots and reconnecting clients."""

    model_config = ConfigDict(extra="forbid")

    status: StreamStatus
    latest_sequence: int
    """Highest sequence number ever assigned in the stream (0 when nothing was written)."""
    chunk_count: int
    """Chunks currently stored; lower than ``latest_sequence`` once chunks were removed."""


class ChunkRecord(BaseModel):
    """A stored chunk with its sequence number (the SSE event id)."""

    model_config = ConfigDict(extra="forbid")

    sequence: int
    chunk: StreamChunk


class StreamWriter(Protocol):
    """Writes one run's chunks to a stream."""

    async def write(self, chunk: StreamChunk) -> None:
        """Append ``chunk`` to the stream; raises ``HelixError`` if the stream has ended."""
        ...

    async def close(self) -> None:
        """Close this writer; the stream stays open (use ``StreamManager.end_stream`` to end it)."""
        ...


class StreamReader(Protocol):
    """A live, single-pass iterator over a stream's chunks.

    Iteration ends when the stream ends, raises when it failed or was truncated under the reader,
    and stops after :meth:`close`.
    """

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        """Return the iterator itself: a reader is consumed once."""
        ...

    async def __anext__(self) -> StreamChunk:
        """Return the next chunk, waiting for it while the stream is open."""
        ...

    async def close(self) -> None:
        """Detach from the stream; a pending or later ``__anext__`` raises ``StopAsyncIteration``."""
        ...


class ResumableStreamReader(StreamReader, Protocol):
    """A reader that knows its position, so a client can reconnect where it stopped."""

    @property
    def current_sequence(self) -> int:
        """Sequence of the last chunk yielded (the start position before the first one)."""
        ...

    @property
    def total_chunks(self) -> int:
        """Chunks currently stored in the stream."""
        ...

    @property
    def latest_sequence(self) -> int:
        """Highest sequence number assigned in the stream so far."""
        ...


class StreamManager(Protocol):
    """Creates streams, writers and readers, and manages stream lifecycle (seed 002)."""

    async def create_writer(self, stream_id: str, run_id: str, agent_type: str) -> StreamWriter:
        """Return a writer for ``stream_id``, creating the stream (or reactivating an ended one)."""
        ...

    async def create_reader(self, stream_id: str) -> StreamReader | None:
        """Return a reader from the start of the stream, or ``None`` if the stream does not exist."""
        ...

    async def create_resumable_reader(self, stream_id: str, *, from_sequence: int = 0) -> ResumableStreamReader | None:
        """Return a reader of the chunks after ``from_sequence``, or ``None`` for an unknown stream."""
        ...

    async def end_stream(self, stream_id: str, output: object = None) -> None:
        """Mark the stream complete; readers finish once they have yielded every stored chunk."""
        ...

    async def fail_stream(self, stream_id: str, error: str) -> None:
        """Mark the stream failed; readers raise ``HelixError`` after the stored chunks."""
        ...

    async def cleanup_to_step(self, stream_id: str, step_count: int) -> None:
        """Remove chunks of steps after ``step_count`` (crash recovery).

        G4: an attached reader that had not yet yielded a removed chunk raises
        ``StreamTruncatedError`` on its next iteration.
        """
        ...

    async def reset_stream(self, stream_id: str) -> None:
        """Remove every chunk and make the stream active again."""
        ...

    async def get_stream_info(self, stream_id: str) -> StreamInfo | None:
        """Return the stream's status and counters, or ``None`` for an unknown stream."""
        ...

    async def write_keyed(
        self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None, *, run_id: str | None = None
    ) -> None:
        """Append ``chunk`` without a writer, stored at most once per ``(stream_id, dedupe_key)``.

        Replay depends on it: a DBOS workflow re-executed after a crash writes its deterministic
        chunks again under the same keys, and a reader must not see them twice. A chunk whose key is
        already stored is dropped without taking a sequence; a key frees up when its chunk is
        removed (``cleanup_to_step``, ``reset_stream``). ``None`` means no dedupe. Creates an
        unknown stream; never reactivates an ended one (the chunk is refused, as a writer's is).
        ``run_id`` is the writing run, for managers that store it.
        """
        ...

    async def read_records(self, stream_id: str, after_sequence: int = 0) -> list[ChunkRecord]:
        """A snapshot of the stored chunks after ``after_sequence``, with their sequences.

        The runtime uses it to find a dead step attempt's chunks when it announces a resync.
        """
        ...
