"""The stream flusher: queued chunks committed in batches, never dropped silently.

:class:`Flusher` is one thread that takes queued chunks in batches (see the batching notes in
:mod:`helix_dbos.stream.sql`). :class:`BatchCommitter` decides what happens to a batch when the
database does not simply take it:

Transient errors (the database restarting, a connection dropped; ``helix_dbos.store.retry``)
    The whole batch transaction is retried with backoff, for the store's retry bound. Chunks wait
    in order meanwhile: nothing is reordered, nothing is lost, flushes wait.

A non-transient error (the database refused something in the batch)
    One stream's bad chunk must not cost the other streams theirs, so the batch is written again
    one stream per transaction; inside a stream that still fails, one chunk per transaction. A
    chunk the database refuses on its own is replaced, at its position, by an ``error`` chunk with
    ``code="stream_gap"`` and ``recoverable=True`` that says which chunk type is missing: readers
    see the gap in order, and the stream goes on. A stream that cannot be written at all (even the
    marker is refused) fails only its own writers.

The database stays away longer than the retry bound
    The batch's chunks are lost, counted per stream, and their writers fail with
    :class:`~helix_dbos.store.retry.DatabaseUnavailableError`. The stream's next write (or its end)
    stores a ``stream_gap`` marker saying how many chunks are missing, so the loss is never silent.

Isolation costs nothing on the normal path: the first attempt is the one transaction it always was.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from helix_dbos.errors import DatabaseUnavailableError, HelixError
from helix_dbos.store import codec
from helix_dbos.store.retry import RetryPolicy, retry_call
from helix_dbos.stream.base import StreamStatus
from helix_dbos.stream.chunks import ErrorChunk, StreamChunk, chunk_to_json

__all__ = ["GAP_CODE", "BatchCommitter", "BatchOutcome", "Flusher", "Hold", "PendingChunk", "storage_body"]

_log = logging.getLogger(__name__)

GAP_CODE: Final = "stream_gap"
"""``ErrorChunk.code`` of the marker that stands where chunks are missing from a stream."""
_INT32 = range(-(2**31), 2**31)
_PATIENT_LIMIT: Final = 10_000
"""Patient streams remembered before the set is dropped and rebuilt."""


@dataclass(slots=True)
class PendingChunk:
    """A chunk serialised and waiting for the flusher."""

    stream_id: str
    run_id: str | None
    chunk_type: str
    step: int | None
    body: str
    """The chunk's JSON as stored (:func:`storage_body`), serialised when it was written."""
    dedupe_key: str | None
    status: StreamStatus | None
    """The stream status this chunk switches to (``run_paused`` / ``run_resumed``), if any."""
    on_failure: Callable[[HelixError], None] | None
    """Tells the chunk's writer it was not stored (``None``: no writer to tell, ``write_keyed``)."""
    represents: int = 1
    """How many written chunks this one stands for (a loss marker: the chunks it reports lost)."""
    queued_at: float = 0.0
    """``time.monotonic()`` when it was queued."""
    patient: bool = False
    """Its stream's commits take its chunks (:meth:`Flusher.take`): it waits for one, up to the delay."""


def storage_body(chunk: StreamChunk) -> str:
    """A chunk's JSON as stored: the wire JSON with NUL and lone surrogates escaped (``store.codec``)."""
    return codec.escape_json_text(chunk_to_json(chunk))


_Barrier = concurrent.futures.Future[None]


@dataclass(eq=False)
class Hold:
    """Chunks of one stream taken out of the queue by a caller that commits them itself.

    See :meth:`Flusher.take`. Chunks of the stream written while the hold is out wait in ``late``
    (never in the queue, so the flusher cannot commit them ahead of the held ones); :meth:`Flusher.release`
    queues them.
    """

    stream_id: str
    items: list[PendingChunk]
    late: list[PendingChunk] = field(default_factory=list)
    done: _Barrier = field(default_factory=concurrent.futures.Future)


def _after(futures: list[_Barrier], then: Callable[[], _Barrier]) -> _Barrier:
    """A future that completes when every one of ``futures`` has, and then ``then()``'s has."""
    outer: _Barrier = concurrent.futures.Future()
    left = [len(futures)]
    lock = threading.Lock()

    def chain(_: object) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        then().add_done_callback(lambda _f: outer.set_result(None))

    for future in futures:
        future.add_done_callback(chain)
    return outer


class Flusher:
    """One thread committing queued chunks in batches, in queue order.

    A barrier (:meth:`barrier`) completes once every chunk queued before it is committed or has
    failed; queueing one also cuts the batching delay short. A barrier for one stream completes at
    once when none of that stream's chunks is queued or being committed: a run's start asks about
    its own stream, and must not force a commit of every other run's chunks (under load that cut
    every batching window short).

    A caller with a transaction of its own on the same database (a run's step commit) can
    :meth:`take` a stream's queued chunks and store them in that transaction, then :meth:`release`
    them: the chunks cost no transaction of their own. A stream taken once is *patient*: its chunks
    wait the full ``max_delay`` from when they were queued for the next take, and only then does
    the flusher commit them, so a run whose steps come faster than that writes its chunks with its
    step commits and the flusher commits nothing. Other chunks keep the rule above (at once after a
    quiet spell), and no chunk waits longer than ``max_delay``.
    """

    def __init__(
        self, commit: Callable[[list[PendingChunk]], None], *, max_chunks: int, max_delay: float, name: str
    ) -> None:
        self._commit = commit
        self._max_chunks = max_chunks
        self._max_delay = max_delay
        self._name = name
        self._cond = threading.Condition()
        self._queue: deque[PendingChunk | _Barrier] = deque()
        self._chunks = 0
        self._barriers = 0
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._last_commit = float("-inf")
        self._per_stream: dict[str, int] = {}  # chunks queued or being committed, by stream
        self._idle = False  # the thread waits for a first chunk (not for a batching window to pass)
        self._in_flight: set[str] = set()  # streams of the batch being committed
        self._holds: dict[str, Hold] = {}  # streams whose chunks a caller took (see take)
        self._patient: set[str] = set()  # streams taken at least once (see take)

    def submit(self, item: PendingChunk) -> int:
        """Queue a chunk; returns how many chunks are queued now (for back-pressure)."""
        with self._cond:
            if self._stopping:
                raise HelixError("The stream manager is closed", code="transport_error", retryable=False)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            item.queued_at = time.monotonic()
            item.patient = item.stream_id in self._patient
            hold = self._holds.get(item.stream_id)
            if hold is not None:  # after the held chunks, whatever happens to them
                hold.late.append(item)
                return self._chunks
            self._queue.append(item)
            self._chunks += 1
            self._per_stream[item.stream_id] = self._per_stream.get(item.stream_id, 0) + 1
            # Wake the thread only when this chunk changes what it does: it was idle, or the batch
            # is now full. Waking it for every chunk inside a batching window cost a thread switch
            # (and a GIL hand-off) per chunk, for nothing: it would only go back to waiting. A
            # patient chunk does not wake it either: the idle thread looks every ``max_delay``.
            if (self._idle and not item.patient) or self._chunks >= self._max_chunks:
                self._cond.notify()
            return self._chunks

    def barrier(self, stream_id: str | None = None) -> _Barrier:
        """Return a future that completes when everything queued so far (of ``stream_id``) is committed.

        Chunks held by a :meth:`take` count: the barrier also waits for their release, and then for
        the chunks written meanwhile.
        """
        with self._cond:
            holds = [h.done for sid, h in self._holds.items() if stream_id is None or sid == stream_id]
            queued = self._queue_barrier(stream_id)
        if not holds:
            return queued
        return _after([queued, *holds], lambda: self._queue_barrier_locked(stream_id))

    def _queue_barrier_locked(self, stream_id: str | None) -> _Barrier:
        with self._cond:
            return self._queue_barrier(stream_id)

    def _queue_barrier(self, stream_id: str | None) -> _Barrier:
        """The barrier over the queue alone (the lock is held)."""
        barrier: _Barrier = concurrent.futures.Future()
        if (not self._queue and not self._busy) or (stream_id is not None and stream_id not in self._per_stream):
            barrier.set_result(None)
            return barrier
        self._queue.append(barrier)
        self._barriers += 1
        self._cond.notify()
        return barrier

    def take(self, stream_id: str) -> Hold | None:
        """Take ``stream_id``'s queued chunks for the caller to store in its own transaction.

        Returns ``None`` (the flusher keeps the chunks) when the stream already has a hold, has
        chunks in the batch being committed (they must get the lower sequences), or a barrier is
        queued (it must see the chunks ahead of it committed). Otherwise the returned hold has the
        chunks, possibly none, in queue order; the caller must :meth:`release` it. The stream is
        patient from now on (see the class docstring).
        """
        with self._cond:
            if self._stopping or self._barriers or stream_id in self._in_flight or stream_id in self._holds:
                return None
            if stream_id not in self._patient:
                if len(self._patient) >= _PATIENT_LIMIT:
                    self._patient.clear()  # a hint: losing it costs a transaction, not correctness
                self._patient.add(stream_id)
            items: list[PendingChunk] = []
            if self._per_stream.get(stream_id):
                kept: deque[PendingChunk | _Barrier] = deque()
                for item in self._queue:
                    if isinstance(item, PendingChunk) and item.stream_id == stream_id:
                        items.append(item)
                    else:
                        kept.append(item)
                self._queue = kept
                self._chunks -= len(items)
                del self._per_stream[stream_id]
            hold = Hold(stream_id, items)
            self._holds[stream_id] = hold
            return hold

    def release(self, hold: Hold, *, stored: bool) -> None:
        """End a :meth:`take`: ``stored`` says the caller committed the held chunks.

        Chunks not stored go back to the queue, ahead of the ones written meanwhile, for the
        flusher to commit (with its retries and isolation) as if they had never been taken.
        """
        back = hold.late if stored else [*hold.items, *hold.late]
        with self._cond:
            self._holds.pop(hold.stream_id, None)
            if back and not self._stopping:
                self._queue.extend(back)
                self._chunks += len(back)
                self._per_stream[hold.stream_id] = self._per_stream.get(hold.stream_id, 0) + len(back)
                self._cond.notify()
                back = []
        if back:  # the flusher is stopping: commit them here rather than drop them
            self._commit(back)
        hold.done.set_result(None)

    def stop(self, timeout: float = 30.0) -> None:
        """Commit what is queued, then stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._wait_for_batch():
                    return
                batch: list[PendingChunk] = []
                barriers: list[_Barrier] = []
                while self._queue and len(batch) < self._max_chunks:
                    item = self._queue.popleft()
                    if isinstance(item, PendingChunk):
                        batch.append(item)
                    else:
                        barriers.append(item)
                self._chunks -= len(batch)
                self._barriers -= len(barriers)
                self._busy = True
                self._in_flight = {item.stream_id for item in batch}
            self._last_commit = time.monotonic()
            try:
                if batch:
                    self._commit(batch)
            except Exception:  # pragma: no cover - the committer reports its own failures
                _log.exception("stream flusher: unexpected error")
            finally:
                with self._cond:
                    self._busy = False
                    self._in_flight = set()
                    for item in batch:
                        left = self._per_stream[item.stream_id] - 1
                        if left:
                            self._per_stream[item.stream_id] = left
                        else:
                            del self._per_stream[item.stream_id]
                for barrier in barriers:
                    barrier.set_result(None)

    def _wait_for_batch(self) -> bool:
        """Wait (holding the lock) until a batch is due; ``False`` when stopping with nothing queued.

        A batch is due when it is full, a barrier waits, the window since the last commit has
        passed, or (patient chunks) ``max_delay`` has passed since the oldest was queued. Takes can
        empty the queue meanwhile: then it waits for a first chunk again.
        """
        while True:
            while not self._queue and not self._stopping:
                self._idle = True
                # Timed once streams are patient: their chunks do not wake this thread (submit).
                self._cond.wait(self._max_delay if self._patient else None)
            self._idle = False
            if not self._queue:
                return False
            if self._chunks >= self._max_chunks or self._barriers or self._stopping:
                return True
            head = self._queue[0]
            deadline = self._last_commit + self._max_delay
            if isinstance(head, PendingChunk) and head.patient:
                impatient = any(isinstance(i, PendingChunk) and not i.patient for i in self._queue)
                deadline = head.queued_at + self._max_delay
                if impatient:
                    deadline = min(deadline, self._last_commit + self._max_delay)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            self._cond.wait(remaining)


# committing a batch -------------------------------------------------------------------------------

WriteStreams = Callable[[dict[str, list[PendingChunk]]], set[str]]
"""Store every group atomically (one statement, or one transaction); return the streams that had ended.

Their chunks are refused."""


@dataclass
class BatchOutcome:
    """What became of a batch: streams that stored chunks, and the chunks of streams that had ended."""

    stored: set[str] = field(default_factory=set)
    ended: dict[str, list[PendingChunk]] = field(default_factory=dict)


@dataclass
class _Loss:
    count: int
    agent_id: str
    agent_type: str


class BatchCommitter:
    """Stores batches for the flusher: retried, isolated per stream and per chunk, losses marked."""

    def __init__(self, write: WriteStreams, policy: RetryPolicy) -> None:
        self._write = write
        self._policy = policy
        self._lock = threading.Lock()
        self._losses: dict[str, _Loss] = {}

    def commit(self, batch: list[PendingChunk]) -> BatchOutcome:
        """Store ``batch`` (see the module docstring); never raises for a database error."""
        groups: dict[str, list[PendingChunk]] = {}
        for item in batch:
            groups.setdefault(item.stream_id, []).append(item)
        with self._lock:
            lost = {sid: self._losses.pop(sid) for sid in list(self._losses) if sid in groups}
        for stream_id, loss in lost.items():
            groups[stream_id].insert(0, self._loss_marker(stream_id, loss))
        outcome = BatchOutcome()
        try:
            ended = self._store(groups, "stream flush")
        except DatabaseUnavailableError as exc:
            for stream_id, items in groups.items():
                self._lose(stream_id, items, exc)
            return outcome
        except Exception as exc:
            _log.warning(
                "stream flusher: a batch of %d chunk(s) in %d stream(s) was refused (%s); storing each stream apart",
                len(batch),
                len(groups),
                _describe(exc),
            )
            for stream_id in sorted(groups):  # the same lock order as the batch
                self._commit_stream(stream_id, groups[stream_id], outcome)
            return outcome
        for stream_id, items in groups.items():
            if stream_id in ended:
                outcome.ended[stream_id] = items
            else:
                outcome.stored.add(stream_id)
        return outcome

    def has_loss(self, stream_id: str) -> bool:
        """Whether chunks of ``stream_id`` were lost and the marker saying so is not stored yet."""
        return stream_id in self._losses

    def pending_loss_marker(self, stream_id: str) -> PendingChunk | None:
        """The marker for chunks of ``stream_id`` lost to an outage and not yet marked, if any."""
        with self._lock:
            loss = self._losses.pop(stream_id, None)
        return None if loss is None else self._loss_marker(stream_id, loss)

    # internals --------------------------------------------------------------------------------------

    def _store(self, groups: dict[str, list[PendingChunk]], operation: str) -> set[str]:
        return retry_call(lambda: self._write(groups), policy=self._policy, operation=operation)

    def _commit_stream(self, stream_id: str, items: list[PendingChunk], outcome: BatchOutcome) -> None:
        try:
            if self._store({stream_id: items}, "stream flush (one stream)"):
                outcome.ended[stream_id] = items
            else:
                outcome.stored.add(stream_id)
            return
        except DatabaseUnavailableError as exc:
            self._lose(stream_id, items, exc)
            return
        except Exception:
            pass  # something in this stream is refused: find it, one chunk at a time
        for index, item in enumerate(items):
            try:
                if self._store({stream_id: [item]}, "stream flush (one chunk)"):
                    outcome.ended[stream_id] = items[index:]
                    return
                outcome.stored.add(stream_id)
                continue
            except DatabaseUnavailableError as exc:
                self._lose(stream_id, [item], exc)
                continue
            except Exception as exc:
                refused = exc
            marker = self._gap_marker(item, refused)
            _log.warning(
                "stream flusher: a %s chunk of stream %r was refused (%s); a %s marker stands in its place",
                item.chunk_type,
                stream_id,
                _describe(refused),
                GAP_CODE,
            )
            try:
                if self._store({stream_id: [marker]}, "stream flush (gap marker)"):
                    outcome.ended[stream_id] = items[index + 1 :]
                    return
                outcome.stored.add(stream_id)
            except Exception as exc:
                error = HelixError(
                    f"Stream {stream_id!r} cannot be stored ({_describe(exc)}); its chunks were dropped",
                    code="transport_error",
                    retryable=False,
                    cause=exc,
                )
                _log.error("stream flusher: %s", error.message)
                for rest in items[index:]:
                    if rest.on_failure is not None:
                        rest.on_failure(error)
                return

    def _lose(self, stream_id: str, items: list[PendingChunk], error: DatabaseUnavailableError) -> None:
        count = sum(item.represents for item in items)
        agent_id, agent_type = _identity(items[-1], stream_id)
        with self._lock:
            loss = self._losses.setdefault(stream_id, _Loss(0, agent_id, agent_type))
            loss.count += count
        _log.error(
            "stream flusher: %d chunk(s) of stream %r lost: %s; a %s marker will say so",
            count,
            stream_id,
            error.message,
            GAP_CODE,
        )
        for item in items:
            if item.on_failure is not None:
                item.on_failure(error)

    @staticmethod
    def _gap_marker(item: PendingChunk, error: BaseException) -> PendingChunk:
        agent_id, agent_type = _identity(item, item.stream_id)
        step = item.step if item.step is not None and item.step in _INT32 else None
        chunk = ErrorChunk(
            agent_id=agent_id,
            agent_type=agent_type,
            step=step,
            timestamp=int(time.time() * 1000),
            error=(
                f"A {item.chunk_type} chunk could not be stored ({_error_class(error)}) and is missing here; "
                "the session's messages and state are complete: reload them to see it."
            ),
            code=GAP_CODE,
            recoverable=True,
        )
        return PendingChunk(
            stream_id=item.stream_id,
            run_id=item.run_id,
            chunk_type=chunk.type,
            step=step,
            body=storage_body(chunk),
            dedupe_key=item.dedupe_key,
            status=item.status,
            on_failure=item.on_failure,
        )

    @staticmethod
    def _loss_marker(stream_id: str, loss: _Loss) -> PendingChunk:
        chunk = ErrorChunk(
            agent_id=loss.agent_id,
            agent_type=loss.agent_type,
            timestamp=int(time.time() * 1000),
            error=(
                f"{loss.count} chunk(s) of this stream were lost: the database was unavailable for longer "
                "than the retry bound. The session's messages and state are complete: reload them."
            ),
            code=GAP_CODE,
            recoverable=True,
        )
        return PendingChunk(stream_id, None, chunk.type, None, storage_body(chunk), None, None, None, loss.count)


def _identity(item: PendingChunk, stream_id: str) -> tuple[str, str]:
    """The emitting agent of a queued chunk, for the marker that replaces it."""
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        data = codec.loads(item.body)
        return str(data["agent_id"]), str(data["agent_type"])
    return item.run_id or stream_id, "unknown"


def _error_class(error: BaseException) -> str:
    orig = getattr(error, "orig", None) or error
    sqlstate = getattr(orig, "sqlstate", None)
    return f"{type(orig).__name__}, SQLSTATE {sqlstate}" if sqlstate else type(orig).__name__


def _describe(error: BaseException) -> str:
    orig = getattr(error, "orig", None) or error
    lines = str(orig).strip().splitlines()
    return f"{type(orig).__name__}: {lines[0] if lines else ''}"
