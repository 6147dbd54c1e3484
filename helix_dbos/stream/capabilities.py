"""The optional fast paths a stream manager may offer beyond :mod:`helix_dbos.stream.base`.

A :class:`~helix_dbos.stream.base.StreamManager` is complete without any of these; what replay
correctness needs (keyed writes, ``write_keyed``) is in the base protocol. A durable manager that
shares the store's database offers them so that a run's stream costs no transaction of its own
on the run's critical path (:class:`TransactionalStream`), or no hop to an event loop per chunk
(:class:`QueueingStream`). They are declared here, not discovered by attribute, so an author sees
what to implement and mypy checks it; the runtime checks them once, when an executor is built
(:mod:`helix_dbos.runtime.backend`). :class:`~helix_dbos.stream.sql.SqlStreamManager` offers all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import StreamChunk

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from helix_dbos.store.dialect import RidingStart, RidingWrite

__all__ = [
    "ActivatableStream",
    "HeldWrites",
    "QueueingStream",
    "RecordReader",
    "RollbackStream",
    "StreamStartInTransaction",
    "ThreadEndingStream",
    "TransactionalStream",
]


class HeldWrites(Protocol):
    """A stream's queued chunks, taken from its flusher to be stored in the store's step commit."""

    def for_commit(self) -> Callable[[Connection], object] | RidingWrite | None:
        """The writes to hand ``commit_step_with``: a callable, or a ``RidingWrite`` for the commit's statement.

        ``None`` when nothing is held: the step is committed alone (``commit_step``), which can then
        skip the transaction a callable would need.
        """
        ...

    def release(self, *, stored: bool) -> None:
        """After the store's transaction, committed or not: chunks not ``stored`` go back to the flusher."""
        ...


class StreamStartInTransaction(Protocol):
    """A stream's part of a run's start, done inside the store's ``start_run_with`` transaction."""

    def latest_sequence(self, conn: Connection) -> int:
        """The stream's latest sequence, read through ``conn`` (0 for a new stream): the run's first."""
        ...

    def activate(self, conn: Connection) -> None:
        """Create the stream or make it active, through ``conn`` (again if the store retries)."""
        ...

    def activated(self) -> None:
        """After the store's transaction committed with :meth:`activate` in it."""
        ...

    def riding(self) -> RidingStart | None:
        """:meth:`latest_sequence` and :meth:`activate` as SQL for a store's one-statement start; ``None``: cannot."""
        ...


@runtime_checkable
class TransactionalStream(Protocol):
    """A manager whose writes can join a transaction on the store's engine.

    Both methods return ``None`` whenever joining is not safe (another engine than the manager's, a
    closed manager, the stream's chunks already being committed, a loss still to report); the
    runtime then writes through the base protocol. What they hand out must keep the stream's
    order: chunks written meanwhile wait until the held ones are released, and held chunks not
    stored go back to the flusher ahead of them.
    """

    def hold_for_transaction(self, stream_id: str, engine: object) -> HeldWrites | None:
        """Take ``stream_id``'s queued chunks to store in the caller's transaction on ``engine``."""
        ...

    def start_for_transaction(self, stream_id: str, engine: object) -> StreamStartInTransaction | None:
        """A run's start of ``stream_id`` for the caller's transaction; queued chunks are committed first."""
        ...


@runtime_checkable
class QueueingStream(Protocol):
    """A manager that takes a keyed write from any thread without waiting (its own thread does the I/O).

    A workflow thread then need not hop to the runtime's event loop per chunk, which costs more
    than the write.
    """

    def enqueue_keyed(
        self, stream_id: str, chunk: StreamChunk, dedupe_key: str | None, *, run_id: str | None = None
    ) -> None:
        """:meth:`~helix_dbos.stream.base.StreamManager.write_keyed` from a thread outside any event loop.

        Must keep the order of the calls, and wait only for back-pressure.
        """
        ...


@runtime_checkable
class ThreadEndingStream(Protocol):
    """A manager that ends a stream from a thread outside any event loop, blocking until it is stored.

    A run's stream is ended by its workflow thread; without this, the end goes through the runtime's
    event loop, and a manager whose I/O is synchronous hands it on to a worker thread from there:
    two thread hand-offs more for one statement.
    """

    def terminate_from_thread(self, stream_id: str, error: str | None = None) -> None:
        """End the stream (``error`` ``None``) or fail it with ``error``, after every chunk queued before.

        The same as ``end_stream`` / ``fail_stream``, errors included (a transient database error
        past the manager's own retry raises ``DatabaseUnavailableError``).
        """
        ...


@runtime_checkable
class ActivatableStream(Protocol):
    """A manager that caches stream status per process, and can make a stream active past its cache.

    ``create_writer`` of such a manager may trust the cache; another process may have ended the
    stream meanwhile (an abort sent to an API process), so a run's start calls :meth:`activate`.
    """

    async def activate(self, stream_id: str) -> None:
        """Create the stream or make it active in the durable store, whatever the cache holds."""
        ...


@runtime_checkable
class RollbackStream(Protocol):
    """A manager that removes chunks by sequence: what a retry from a checkpoint needs.

    ``cleanup_to_step`` removes by step, and a run's steps count from 1 in every run of a session, so
    it cannot say "everything after this checkpoint" once the stream holds several runs. Without
    this capability a rollback still announces itself (``stream_resync``) but removes nothing.
    Both managers of this package offer it.
    """

    async def cleanup_after_sequence(self, stream_id: str, sequence: int, step_count: int) -> None:
        """Remove every chunk after ``sequence``.

        Attached readers that had not reached a removed chunk raise ``StreamTruncatedError``
        (``truncated_at_step=step_count``) on their next iteration.
        """
        ...


@runtime_checkable
class RecordReader(Protocol):
    """A reader that yields a chunk with its sequence in one call (no read of ``current_sequence`` after)."""

    async def next_record(self) -> ChunkRecord:
        """The next chunk with its sequence; raises ``StopAsyncIteration`` at the end, as ``__anext__``."""
        ...
