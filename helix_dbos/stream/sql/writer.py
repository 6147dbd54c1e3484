"""The SQL stream writer: queues chunks for the manager's flusher and reports their failures.

``write`` returns before its chunk is committed (the flusher batches commits; see
:mod:`helix_dbos.stream.sql`), so a chunk that fails to commit is reported by the writer's *next*
``write``, ``flush`` or ``close``. The flusher reaches the writer through the ``on_failure``
callback each queued chunk carries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from helix_dbos.errors import HelixError
from helix_dbos.stream.chunks import StreamChunk


class Enqueue(Protocol):
    """The manager's way in for a writer: queue ``chunk`` for the flusher."""

    def __call__(
        self,
        stream_id: str,
        chunk: StreamChunk,
        *,
        dedupe_key: str | None,
        run_id: str | None,
        on_failure: Callable[[HelixError], None] | None,
    ) -> Awaitable[None]:
        """Queue ``chunk``; raises at once if the manager knows the stream has ended."""
        ...


class SqlStreamWriter:
    """A :class:`~helix_dbos.stream.base.StreamWriter` queueing chunks for the manager's flusher."""

    def __init__(
        self, enqueue: Enqueue, flush: Callable[[], Awaitable[None]], stream_id: str, run_id: str, agent_type: str
    ) -> None:
        self._enqueue = enqueue
        self._flush = flush
        self._closed = False
        self._error: HelixError | None = None
        self.stream_id = stream_id
        self.run_id = run_id
        self.agent_type = agent_type

    async def write(self, chunk: StreamChunk, *, dedupe_key: str | None = None) -> None:
        """Queue ``chunk``; it is stored once per ``dedupe_key`` (``None``: always stored).

        Returns before the chunk is committed (see the package docstring on batching). Raises
        ``HelixError`` (``transport_error``) if this writer is closed, if the stream is known to
        have ended, or if an earlier chunk of this writer failed to commit.
        """
        self._raise_pending()
        if self._closed:
            raise HelixError(f"Writer for stream {self.stream_id!r} is closed", code="transport_error", retryable=False)
        await self._enqueue(self.stream_id, chunk, dedupe_key=dedupe_key, run_id=self.run_id, on_failure=self._fail)

    async def flush(self) -> None:
        """Wait until every chunk queued so far is committed; raise if one of this writer's failed."""
        await self._flush()
        self._raise_pending()

    async def close(self) -> None:
        """Flush, then refuse further writes; the stream stays open (``end_stream`` ends it)."""
        if not self._closed:
            self._closed = True
            await self._flush()
        self._raise_pending()

    def _fail(self, error: HelixError) -> None:
        if self._error is None:
            self._error = error

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error
