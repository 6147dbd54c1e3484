"""When embeddings are computed: inline (the default) or in the background with bounded concurrency.

``MemoryManager.save`` hands each new memory's embedding job to an executor. Inline keeps things
simple and makes a saved memory vector-searchable as soon as ``save`` returns. Background returns
at once (the memory is full-text searchable already) and runs at most ``max_concurrency`` jobs at a
time; :meth:`BackgroundEmbeddingExecutor.shutdown` drains what is queued, so a process that exits
cleanly leaves nothing ``pending``. What a crash leaves pending,
``MemoryManager.process_unembedded_memories`` picks up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol, runtime_checkable

from helix_dbos.errors import EmbeddingExecutorClosedError

_log = logging.getLogger("helix_dbos.memory")

EmbeddingJob = Callable[[], None]


@runtime_checkable
class EmbeddingExecutor(Protocol):
    """Runs embedding jobs; a job records its own outcome in the store and never raises."""

    def submit(self, job: EmbeddingJob) -> None:
        """Run ``job`` now or later."""
        ...

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop taking jobs; with ``wait``, return once every submitted job has finished."""
        ...


class InlineEmbeddingExecutor:
    """Runs each job in the caller's thread (the default): ``save`` returns with the embedding stored."""

    def __init__(self) -> None:
        self._closed = False

    def submit(self, job: EmbeddingJob) -> None:
        if self._closed:
            raise EmbeddingExecutorClosedError()
        _run(job)

    def shutdown(self, *, wait: bool = True) -> None:
        self._closed = True


class BackgroundEmbeddingExecutor:
    """Fire-and-forget jobs on at most ``max_concurrency`` threads; ``shutdown()`` drains the queue."""

    def __init__(self, max_concurrency: int = 4) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="helix-embedding")
        self._lock = threading.Lock()
        self._pending: set[Future[None]] = set()
        self._closed = False

    def submit(self, job: EmbeddingJob) -> None:
        with self._lock:
            if self._closed:
                raise EmbeddingExecutorClosedError()
            future = self._pool.submit(_run, job)
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    @property
    def pending_count(self) -> int:
        """Jobs submitted and not yet finished (queued or running)."""
        with self._lock:
            return len(self._pending)

    def shutdown(self, *, wait: bool = True) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=wait)


def _run(job: EmbeddingJob) -> None:
    try:
        job()
    except Exception:  # a job records its failure itself; this is the last line of defence
        _log.exception("embedding job failed")


__all__ = ["BackgroundEmbeddingExecutor", "EmbeddingExecutor", "EmbeddingJob", "InlineEmbeddingExecutor"]
