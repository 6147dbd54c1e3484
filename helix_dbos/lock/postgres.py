"""``PostgresLockManager``: the seeds' lock manager on the store's PostgreSQL database.

One row per held resource in ``helix_locks`` (migration 0008). Design choices, and why:

- **Expiry by TTL, not by connection.** A lock is a row with ``expires_at``, not a session advisory
  lock: an advisory lock dies with its connection, so a pooled connection, a failover or a dropped
  TCP session would release it silently, while a holder that still runs believes it holds it. A row
  outlives connections, and ``with_lock``'s heartbeat keeps it alive only while its holder works.
- **The database's clock decides.** ``acquired_at`` / ``expires_at`` come from ``clock_timestamp()``
  in the statement, so processes with skewed clocks agree on who holds a lock.
- **Fencing tokens from a sequence** (``helix_lock_fencing_tokens``): ``nextval`` never goes back,
  also across resources, restarts and failovers, so a newer holder always has a larger token.
- **One statement per operation.** Acquire is ``INSERT .. ON CONFLICT DO UPDATE .. WHERE expired``:
  taking a free, expired or own lock is atomic without a read first. A retried acquire whose first
  commit was applied (lost acknowledgement) finds its own ``lock_id`` and takes it again.
"""

from __future__ import annotations

import sqlalchemy as sa

from helix_dbos.errors import HelixError
from helix_dbos.lock.base import DistributedLock, LockAcquisitionResult, LockManagerBase
from helix_dbos.store.engine import create_engine_for
from helix_dbos.store.retry import RetryPolicy, retrying

_NOW = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

_ACQUIRE = sa.text(
    f"""
    INSERT INTO helix_locks AS l (resource, lock_id, holder_id, fencing_token, acquired_at, expires_at)
    SELECT :resource, :lock_id, :holder_id, nextval('helix_lock_fencing_tokens'), t.now, t.now + :ttl_ms
    FROM (SELECT {_NOW} AS now) AS t  -- one clock read: two could straddle a millisecond
    ON CONFLICT (resource) DO UPDATE SET
        lock_id = EXCLUDED.lock_id, holder_id = EXCLUDED.holder_id, fencing_token = EXCLUDED.fencing_token,
        acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at <= EXCLUDED.acquired_at OR l.lock_id = EXCLUDED.lock_id
    RETURNING fencing_token, acquired_at, expires_at
    """
)
_HOLDER = sa.text("SELECT holder_id FROM helix_locks WHERE resource = :resource")
_EXTEND = sa.text(
    f"""
    UPDATE helix_locks SET expires_at = {_NOW} + :ttl_ms
    WHERE resource = :resource AND lock_id = :lock_id AND expires_at > {_NOW}
    RETURNING expires_at
    """
)
_RELEASE = sa.text(
    f"""
    DELETE FROM helix_locks WHERE resource = :resource AND lock_id = :lock_id
    RETURNING expires_at > {_NOW} AS live
    """
)
_CURRENT = sa.text(f"SELECT fencing_token FROM helix_locks WHERE resource = :resource AND expires_at > {_NOW}")


class PostgresLockManager(LockManagerBase):
    """Locks between processes on a PostgreSQL database migrated by ``helix-dbos db upgrade``.

    Give it the store's URL (or an engine to share a pool). Every operation is one short transaction,
    retried on transient errors like the store's (``retry_policy``, default ``RetryPolicy()``: 120 s).
    """

    def __init__(
        self,
        url_or_engine: str | sa.Engine,
        *,
        holder_id: str | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        super().__init__(holder_id)
        self._owns_engine = isinstance(url_or_engine, str)
        self._engine = create_engine_for(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
        if self._engine.dialect.name != "postgresql":
            raise HelixError("PostgresLockManager needs PostgreSQL", code="framework_not_supported")
        self._retry_policy = retry_policy or RetryPolicy()

    @property
    def retry_policy(self) -> RetryPolicy:
        """How transient database errors are retried."""
        return self._retry_policy

    def close(self) -> None:
        """Dispose of the engine if this manager created it."""
        if self._owns_engine:
            self._engine.dispose()

    @retrying
    def _try_acquire(self, resource: str, lock_id: str, ttl_ms: int) -> LockAcquisitionResult:
        params = {"resource": resource, "lock_id": lock_id, "holder_id": self.holder_id, "ttl_ms": ttl_ms}
        with self._engine.begin() as conn:
            row = conn.execute(_ACQUIRE, params).first()
            if row is None:
                holder = conn.execute(_HOLDER, {"resource": resource}).scalar()
                return LockAcquisitionResult(False, held_by=holder)
        token, acquired_at, expires_at = row
        return LockAcquisitionResult(
            True, DistributedLock(resource, lock_id, int(token), int(acquired_at), int(expires_at), self.holder_id)
        )

    @retrying
    def extend(self, lock: DistributedLock, ttl_ms: int) -> DistributedLock | None:
        """See :class:`helix_dbos.lock.LockManager`."""
        with self._engine.begin() as conn:
            expires_at = conn.execute(
                _EXTEND, {"resource": lock.resource, "lock_id": lock.lock_id, "ttl_ms": ttl_ms}
            ).scalar()
        if expires_at is None:
            return None
        return DistributedLock(
            lock.resource, lock.lock_id, lock.fencing_token, lock.acquired_at, int(expires_at), lock.holder_id
        )

    @retrying
    def release(self, lock: DistributedLock) -> bool:
        """See :class:`helix_dbos.lock.LockManager`: ``False`` if the lock had expired or was taken."""
        with self._engine.begin() as conn:
            live = conn.execute(_RELEASE, {"resource": lock.resource, "lock_id": lock.lock_id}).scalar()
        return bool(live)

    @retrying
    def current_token(self, resource: str) -> int | None:
        """See :meth:`helix_dbos.lock.LockManagerBase.current_token`."""
        with self._engine.begin() as conn:
            token = conn.execute(_CURRENT, {"resource": resource}).scalar()
        return None if token is None else int(token)
