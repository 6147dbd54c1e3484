"""The seeds' lock manager contract (seed 002 "Lock Manager"), and the implementations without a database.

helix-dbos does not need a lock to keep one writer per run: a DBOS workflow id is unique, and every
store write is a compare-and-set on the session's version (a second writer gets ``StaleStateError``).
A lock manager is for the application's own critical sections, typically inside tools: two sessions
that update the same external record, a nightly job that must run in one process only. Hold the lock
for a bounded time (``ttl_ms``), and pass its ``fencing_token`` to the system you write to so that a
holder whose lock expired (a long GC pause, a partition) is refused there: tokens only grow.

- :class:`NoOpLockManager`: every acquire succeeds (single-process deployments, tests).
- :class:`InMemoryLockManager`: real exclusion between threads of one process.
- :class:`helix_dbos.lock.postgres.PostgresLockManager`: between processes, on the store's database.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar, runtime_checkable

from helix_dbos.errors import FencingTokenMismatchError, LockLostError, LockNotAcquiredError

T = TypeVar("T")

_POLL_SECONDS = 0.05
"""How often a waiting ``acquire`` tries again."""


@dataclass(frozen=True)
class DistributedLock:
    """A held lock (seed 002 ``DistributedLock``). Times are milliseconds since the epoch."""

    resource: str
    lock_id: str
    """Unique per acquisition: ``extend`` and ``release`` only act on this acquisition."""
    fencing_token: int
    """Grows with every acquisition of any resource of the manager; a newer holder has a larger one."""
    acquired_at: int
    expires_at: int
    holder_id: str


@dataclass(frozen=True)
class AcquireOptions:
    """How to acquire (seed 002 ``AcquireOptions``)."""

    ttl_ms: int
    """The lock expires this long after acquisition (or the last ``extend``) unless released."""
    wait: bool = False
    """Wait for a held lock to be released or to expire, instead of failing at once."""
    wait_timeout_ms: int | None = None
    """The longest wait; ``None`` waits up to ``ttl_ms`` (a lock held that long has expired or been
    extended, and extended locks are someone's live work)."""

    def __post_init__(self) -> None:
        if self.ttl_ms <= 0:
            raise ValueError(f"ttl_ms must be positive, not {self.ttl_ms}")
        if self.wait_timeout_ms is not None and self.wait_timeout_ms < 0:
            raise ValueError(f"wait_timeout_ms must not be negative, not {self.wait_timeout_ms}")


@dataclass(frozen=True)
class LockAcquisitionResult:
    """What ``acquire`` returns: the lock, or who holds it."""

    acquired: bool
    lock: DistributedLock | None = None
    held_by: str | None = None
    """The holder that kept the lock from us (when known)."""


@runtime_checkable
class LockManager(Protocol):
    """The seeds' ``LockManager`` interface."""

    @property
    def holder_id(self) -> str:
        """Who this manager acquires as (one per process, by default)."""
        ...

    def acquire(self, resource: str, options: AcquireOptions) -> LockAcquisitionResult:
        """Take ``resource`` for ``options.ttl_ms``; never raises because the lock is held."""
        ...

    def extend(self, lock: DistributedLock, ttl_ms: int) -> DistributedLock | None:
        """Push the expiry to now + ``ttl_ms``; ``None`` if the lock was lost (expired and taken, or released)."""
        ...

    def release(self, lock: DistributedLock) -> bool:
        """Release the lock; ``False`` if it was no longer held by this acquisition."""
        ...

    def with_lock(
        self, resource: str, fn: Callable[[DistributedLock], T], *, ttl_ms: int, heartbeat_ms: int | None = None
    ) -> T:
        """Run ``fn`` holding ``resource``, extending it every ``heartbeat_ms``; release it after."""
        ...


class LockManagerBase:
    """``wait``, ``with_lock`` and fencing checks over three primitives a subclass provides.

    Subclasses implement ``_try_acquire`` (one attempt), ``extend``, ``release`` and ``current_token``.
    """

    def __init__(self, holder_id: str | None = None) -> None:
        self._holder_id = holder_id or f"holder-{uuid.uuid4().hex[:12]}"

    @property
    def holder_id(self) -> str:
        """Who this manager acquires as."""
        return self._holder_id

    def _try_acquire(self, resource: str, lock_id: str, ttl_ms: int) -> LockAcquisitionResult:
        raise NotImplementedError

    def extend(self, lock: DistributedLock, ttl_ms: int) -> DistributedLock | None:
        """See :class:`LockManager`."""
        raise NotImplementedError

    def release(self, lock: DistributedLock) -> bool:
        """See :class:`LockManager`."""
        raise NotImplementedError

    def current_token(self, resource: str) -> int | None:
        """The fencing token of the live lock on ``resource``, or ``None`` if nobody holds it."""
        raise NotImplementedError

    def acquire(self, resource: str, options: AcquireOptions) -> LockAcquisitionResult:
        """See :class:`LockManager`: with ``wait``, try again until the lock is free or the wait ends."""
        lock_id = uuid.uuid4().hex
        result = self._try_acquire(resource, lock_id, options.ttl_ms)
        if result.acquired or not options.wait:
            return result
        timeout_ms = options.ttl_ms if options.wait_timeout_ms is None else options.wait_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        while time.monotonic() < deadline:
            time.sleep(min(_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            result = self._try_acquire(resource, lock_id, options.ttl_ms)
            if result.acquired:
                return result
        return result

    def check_fencing_token(self, lock: DistributedLock) -> None:
        """Raise :class:`FencingTokenMismatchError` unless ``lock`` is still the live holder of its resource.

        Call it before a write the lock protects when the target system cannot check tokens itself.
        """
        actual = self.current_token(lock.resource)
        if actual != lock.fencing_token:
            raise FencingTokenMismatchError(lock.resource, lock.fencing_token, actual)

    def with_lock(
        self,
        resource: str,
        fn: Callable[[DistributedLock], T],
        *,
        ttl_ms: int,
        heartbeat_ms: int | None = None,
        wait: bool = True,
        wait_timeout_ms: int | None = None,
    ) -> T:
        """Run ``fn(lock)`` holding ``resource``; raise :class:`LockNotAcquiredError` if it stays held.

        A background thread extends the lock every ``heartbeat_ms`` (default ``ttl_ms / 3``). If an
        extension finds the lock lost, ``fn`` still runs to its end (Python cannot stop a thread
        safely), and ``with_lock`` then raises :class:`LockLostError` instead of returning: the caller
        must treat what ``fn`` did as unprotected. Fencing tokens are how the target refuses it.
        """
        result = self.acquire(resource, AcquireOptions(ttl_ms=ttl_ms, wait=wait, wait_timeout_ms=wait_timeout_ms))
        if not result.acquired or result.lock is None:
            raise LockNotAcquiredError(resource, result.held_by or "unknown")
        lock = result.lock
        interval = (heartbeat_ms if heartbeat_ms is not None else max(1, ttl_ms // 3)) / 1000
        stop = threading.Event()
        lost = threading.Event()

        def heartbeat() -> None:
            nonlocal lock
            while not stop.wait(interval):
                try:
                    extended = self.extend(lock, ttl_ms)
                except Exception:  # a transient failure past the store's retries: try at the next beat
                    continue
                if extended is None:
                    lost.set()
                    return
                lock = extended

        thread = threading.Thread(target=heartbeat, name=f"helix-lock-{resource}", daemon=True)
        thread.start()
        try:
            value = fn(lock)
        finally:
            stop.set()
            thread.join()
            if not lost.is_set():
                self.release(lock)
        if lost.is_set():
            raise LockLostError(resource, lock.fencing_token)
        return value


class NoOpLockManager(LockManagerBase):
    """Every operation succeeds at once (seed 002): for a single process, or code that needs no exclusion."""

    def __init__(self, holder_id: str | None = None) -> None:
        super().__init__(holder_id)
        self._tokens = itertools.count(1)

    def _try_acquire(self, resource: str, lock_id: str, ttl_ms: int) -> LockAcquisitionResult:
        now = _now_ms()
        token = next(self._tokens)
        return LockAcquisitionResult(True, DistributedLock(resource, lock_id, token, now, now + ttl_ms, self.holder_id))

    def extend(self, lock: DistributedLock, ttl_ms: int) -> DistributedLock | None:
        """Always succeeds."""
        return replace(lock, expires_at=_now_ms() + ttl_ms)

    def release(self, lock: DistributedLock) -> bool:
        """Always succeeds."""
        return True

    def current_token(self, resource: str) -> int | None:
        """Unknown: the no-op manager keeps nothing, so :meth:`check_fencing_token` always passes."""
        return None

    def check_fencing_token(self, lock: DistributedLock) -> None:
        """Never raises."""


class InMemoryLockManager(LockManagerBase):
    """Exclusion between the threads of one process, with TTL expiry and growing fencing tokens.

    Several managers (different ``holder_id``s, as several processes would have) may share one
    table by passing the same ``shared`` instance's state: ``InMemoryLockManager(shared=other)``.
    """

    def __init__(self, holder_id: str | None = None, *, shared: InMemoryLockManager | None = None) -> None:
        super().__init__(holder_id)
        if shared is None:
            self._guard = threading.Lock()
            self._locks: dict[str, DistributedLock] = {}
            self._tokens = itertools.count(1)
        else:
            self._guard, self._locks, self._tokens = shared._guard, shared._locks, shared._tokens

    def _try_acquire(self, resource: str, lock_id: str, ttl_ms: int) -> LockAcquisitionResult:
        with self._guard:
            now = _now_ms()
            held = self._locks.get(resource)
            if held is not None and held.expires_at > now and held.lock_id != lock_id:
                return LockAcquisitionResult(False, held_by=held.holder_id)
            lock = DistributedLock(resource, lock_id, next(self._tokens), now, now + ttl_ms, self.holder_id)
            self._locks[resource] = lock
            return LockAcquisitionResult(True, lock)

    def extend(self, lock: DistributedLock, ttl_ms: int) -> DistributedLock | None:
        """See :class:`LockManager`."""
        with self._guard:
            now = _now_ms()
            held = self._locks.get(lock.resource)
            if held is None or held.lock_id != lock.lock_id or held.expires_at <= now:
                return None
            extended = replace(held, expires_at=now + ttl_ms)
            self._locks[lock.resource] = extended
            return extended

    def release(self, lock: DistributedLock) -> bool:
        """See :class:`LockManager`."""
        with self._guard:
            held = self._locks.get(lock.resource)
            if held is None or held.lock_id != lock.lock_id:
                return False
            del self._locks[lock.resource]
            return held.expires_at > _now_ms()

    def current_token(self, resource: str) -> int | None:
        """See :meth:`LockManagerBase.current_token`."""
        with self._guard:
            held = self._locks.get(resource)
            return held.fencing_token if held is not None and held.expires_at > _now_ms() else None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
