"""The background collection: :class:`RetentionSweeper` runs :func:`collect_garbage` every N seconds.

A worker (``helix-dbos worker --gc-every SECONDS``) or a server (``serve --gc-every``) starts one.
Several processes may each run one: on PostgreSQL a round first takes a session-level advisory
lock with ``pg_try_advisory_lock`` and a process that does not get it skips the round, so one
collection runs at a time across the fleet; were two to run anyway (SQLite, or a lock lost with its
connection), every delete names its rows by key and each session is claimed once
(:mod:`.executor`). A round that fails is logged and the next round tries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy import Engine

from helix_dbos.retention.executor import GcReport, collect_garbage
from helix_dbos.retention.policy import RetentionPolicy
from helix_dbos.retention.workflows import WorkflowRows
from helix_dbos.store.engine import create_engine_for, now_ms

__all__ = ["GC_LOCK_KEY", "RetentionSweeper"]

logger = logging.getLogger("helix_dbos.retention")

GC_LOCK_KEY = 0x6865_6C69_7867_6300 >> 1
"""The PostgreSQL advisory lock key a collection round holds ("helixgc")."""


class RetentionSweeper:
    """One daemon thread collecting garbage every ``every_seconds`` until :meth:`stop`.

    ``database`` is the store's engine or URL.
    """

    THREAD_NAME = "helix-retention"

    def __init__(
        self,
        database: Engine | str,
        policy: RetentionPolicy,
        workflows: WorkflowRows | None,
        *,
        every_seconds: float,
        batch_size: int = 500,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        policy.require_a_limit()
        if every_seconds <= 0:
            raise ValueError(f"every_seconds must be positive, not {every_seconds}")
        # A URL gets an engine of its own, disposed by stop(); an engine passed in is the caller's.
        self._owns_engine = isinstance(database, str)
        self._engine = create_engine_for(database) if isinstance(database, str) else database
        self._policy = policy
        self._workflows = workflows
        self._every = every_seconds
        self._batch = batch_size
        self._clock = clock_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        """Rounds that collected (a round skipped for the lock or failed is not counted)."""
        self.last_report: GcReport | None = None

    def run_once(self) -> GcReport | None:
        """One round now; ``None`` when another process holds the collection lock."""
        if self._engine.dialect.name != "postgresql":
            return self._collect()
        with self._engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            if not conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": GC_LOCK_KEY}).scalar_one():
                return None
            try:
                return self._collect()
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": GC_LOCK_KEY})

    def _collect(self) -> GcReport:
        report = collect_garbage(
            self._engine, self._policy, self._workflows, now_ms=self._clock(), batch_size=self._batch
        )
        self.rounds += 1
        self.last_report = report
        return report

    def start(self) -> None:
        """Start the thread (idempotent); the first round runs one interval after the start."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(self._every):
                try:
                    self.run_once()
                except Exception:
                    logger.exception("retention: a collection round failed; the next one retries")

        self._thread = threading.Thread(target=loop, name=self.THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 10.0) -> None:
        """Stop the thread, waiting up to ``timeout_seconds`` for a round in progress."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_seconds)
        if self._owns_engine:
            self._engine.dispose()
