"""Worker heartbeats: how a live worker knows another one died for good.

DBOS recovers a process's in-flight workflows when a process with the *same* executor id starts
again. A worker that never comes back needs someone else to declare it dead: every worker writes a
heartbeat here, and a worker that sees another's heartbeat older than the takeover threshold asks
DBOS to re-enqueue that executor's pending workflows (which any live worker then dequeues).

Claiming a dead executor is a compare-and-set on its row, so several live workers do not all
recover it; DBOS's re-enqueue is itself idempotent, so a duplicate would be harmless anyway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from helix_dbos.store.base import WorkerRecord
from helix_dbos.store.process import ProcessIdentity
from helix_dbos.store.retry import RetryPolicy, retrying
from helix_dbos.store.schema import workers


def _renew(*, tokened: bool) -> sa.Update:
    """The heartbeat of :meth:`SqlWorkerRegistry.renew`, for a process with or without a token.

    It and :data:`_CLAIM_DEAD` run every second in every worker, busy or idle: built once and bound
    per call, they cost the sweep their round trip and little more (issue 32).
    """
    token = workers.c.process_token
    return (
        sa.update(workers)
        .where(
            workers.c.executor_id == sa.bindparam("renewing"),
            workers.c.hostname == sa.bindparam("host"),
            workers.c.pid == sa.bindparam("process"),
            token == sa.bindparam("process_token_is") if tokened else token.is_(None),
        )
        .values(
            app_version=sa.bindparam("version"),
            heartbeat_at=sa.bindparam("now"),
            recovered_at=None,
            recovered_by=None,
        )
    )


_RENEW: Final = _renew(tokened=True)
_RENEW_UNTOKENED: Final = _renew(tokened=False)
_CLAIM_DEAD: Final = (
    sa.update(workers)
    .where(
        workers.c.executor_id != sa.bindparam("me"),
        workers.c.app_version == sa.bindparam("version"),
        workers.c.heartbeat_at < sa.bindparam("threshold"),
        workers.c.recovered_at.is_(None),
    )
    .values(recovered_at=sa.bindparam("now"), recovered_by=sa.bindparam("me"))
    .returning(workers.c.executor_id)
)
"""Workers of this app version with a heartbeat older than the threshold, claimed (``claim_dead``)."""


class SqlWorkerRegistry:
    """:class:`~helix_dbos.store.base.WorkerRegistry` over the store's engine (PostgreSQL or SQLite)."""

    def __init__(self, engine: Engine, *, retry: RetryPolicy | None = None) -> None:
        self._engine = engine
        self._retry = retry if retry is not None else RetryPolicy()

    @property
    def retry_policy(self) -> RetryPolicy:
        """How operations retry transient database errors (see ``helix_dbos.store.retry``)."""
        return self._retry

    @retrying
    def heartbeat(self, executor_id: str, app_version: str, now_ms: int) -> None:
        """Record that ``executor_id`` is alive (and clear an old takeover claim: it came back)."""
        me = ProcessIdentity.current()
        values: dict[str, Any] = {
            "app_version": app_version,
            "hostname": me.hostname,
            "pid": me.pid,
            "process_token": me.token,
            "heartbeat_at": now_ms,
            "recovered_at": None,
            "recovered_by": None,
        }
        with self._engine.begin() as conn:
            updated = conn.execute(
                sa.update(workers).where(workers.c.executor_id == executor_id).values(values)
            ).rowcount
            if updated == 0:
                insert = workers.insert().values(executor_id=executor_id, started_at=now_ms, **values)
                try:
                    with conn.begin_nested():
                        conn.execute(insert)
                except sa.exc.IntegrityError:
                    conn.execute(sa.update(workers).where(workers.c.executor_id == executor_id).values(values))

    @retrying
    def renew(self, executor_id: str, app_version: str, now_ms: int) -> bool:
        """Write this process's heartbeat if its row still names this process; False if another took the id."""
        me = ProcessIdentity.current()
        statement = _RENEW_UNTOKENED if me.token is None else _RENEW
        params = {"renewing": executor_id, "host": me.hostname, "process": me.pid, "process_token_is": me.token}
        with self._engine.begin() as conn:
            updated = conn.execute(statement, {**params, "version": app_version, "now": now_ms}).rowcount
            return bool(updated == 1)

    @retrying
    def list_workers(self) -> list[WorkerRecord]:
        """Every known worker."""
        with self._engine.connect() as conn:
            return [WorkerRecord.model_validate(dict(r._mapping)) for r in conn.execute(sa.select(workers))]

    @retrying
    def claim_dead(self, *, me: str, app_version: str, now_ms: int, dead_after_ms: int) -> list[str]:
        """Claim workers of this app version whose heartbeat is older than ``dead_after_ms``."""
        params = {"me": me, "version": app_version, "threshold": now_ms - dead_after_ms, "now": now_ms}
        with self._engine.begin() as conn:
            result = conn.execute(_CLAIM_DEAD, params)
            return [r.executor_id for r in result]

    @retrying
    def claim(self, executor_id: str, *, app_version: str, now_ms: int, replacing: WorkerRecord | None) -> bool:
        """Take ``executor_id`` for this process if its row is still ``replacing`` (``None``: no row yet)."""
        me = ProcessIdentity.current()
        values: dict[str, Any] = {
            "app_version": app_version,
            "hostname": me.hostname,
            "pid": me.pid,
            "process_token": me.token,
            "started_at": now_ms,
            "heartbeat_at": now_ms,
            "recovered_at": None,
            "recovered_by": None,
        }
        with self._engine.begin() as conn:
            if replacing is None:
                try:
                    with conn.begin_nested():
                        conn.execute(workers.insert().values(executor_id=executor_id, **values))
                except sa.exc.IntegrityError:
                    return False  # another process inserted it first
                return True
            # The row as it was read: a heartbeat or another claim since then changes heartbeat_at.
            updated = conn.execute(
                sa.update(workers)
                .where(
                    workers.c.executor_id == executor_id,
                    workers.c.hostname == replacing.hostname,
                    workers.c.pid == replacing.pid,
                    workers.c.process_token.is_(None)
                    if replacing.process_token is None
                    else workers.c.process_token == replacing.process_token,
                    workers.c.heartbeat_at == replacing.heartbeat_at,
                )
                .values(values)
            ).rowcount
            return bool(updated == 1)

    @retrying
    def release(self, executor_id: str) -> None:
        """Give ``executor_id`` up at a clean exit, if this process still holds it (its ``pid`` becomes 0)."""
        me = ProcessIdentity.current()
        with self._engine.begin() as conn:
            conn.execute(
                sa.update(workers)
                .where(workers.c.executor_id == executor_id, workers.c.hostname == me.hostname, workers.c.pid == me.pid)
                .values(pid=0, process_token=None)
            )


if TYPE_CHECKING:
    from helix_dbos.store.base import WorkerRegistry

    _protocol_check: type[WorkerRegistry] = SqlWorkerRegistry
