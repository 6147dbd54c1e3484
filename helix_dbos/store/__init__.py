"""Durable storage for sessions, transcripts, runs, checkpoints, usage, pending calls and workers.

The interface is :mod:`helix_dbos.store.base` (records and the protocols :class:`SessionStore`,
:class:`PendingCallStore`, :class:`WorkerRegistry`); :class:`SqlSessionStore` implements it on
PostgreSQL and SQLite. Modules, one concept each:

- ``base``: records and protocols (imports no implementation);
- ``engine``: engines, ``begin_read`` / ``begin_write``, ``now_ms``, ``dialect_for``;
- ``dialect``, ``postgres``, ``sqlite``: what the two backends spell differently;
- ``sessions`` (the facade and session rows), ``status``, ``runs``, ``commit``, ``checkpoints``,
  ``transcript``, ``rows``: the session store;
- ``hitl``: pending tool calls; ``workers``: heartbeats;
- ``schema``, ``migrate``, ``migrations/``: tables and their alembic revisions;
- ``codec``: the reversible JSON escape; ``retry``: transient-error retry.

``helix_dbos.testing.store_contract`` is the suite any ``SessionStore`` implementation can run.
"""

from helix_dbos.store.base import (
    CasResult,
    CommitResult,
    Delivery,
    PaginatedCheckpoints,
    PaginatedMessages,
    PendingCallStore,
    PendingKind,
    PendingStatus,
    PendingToolCall,
    RunRecord,
    SessionRecord,
    SessionStore,
    StartRun,
    StartRunResult,
    StepCommit,
    SubmitOutcome,
    UsageRecord,
    UsageRow,
    WorkerRecord,
    WorkerRegistry,
)
from helix_dbos.store.dialect import SqlDialect
from helix_dbos.store.engine import begin_read, begin_write, create_engine_for, dialect_for, now_ms, to_sqlalchemy_url
from helix_dbos.store.hitl import SqlPendingCallStore
from helix_dbos.store.migrate import check_migrated, upgrade
from helix_dbos.store.postgres import PostgresDialect
from helix_dbos.store.retry import RetryPolicy
from helix_dbos.store.sessions import SqlSessionStore
from helix_dbos.store.sqlite import SqliteDialect
from helix_dbos.store.workers import SqlWorkerRegistry

__all__ = [
    "CasResult",
    "CommitResult",
    "Delivery",
    "PaginatedCheckpoints",
    "PaginatedMessages",
    "PendingCallStore",
    "PendingKind",
    "PendingStatus",
    "PendingToolCall",
    "PostgresDialect",
    "RetryPolicy",
    "RunRecord",
    "SessionRecord",
    "SessionStore",
    "SqlDialect",
    "SqlPendingCallStore",
    "SqlSessionStore",
    "SqlWorkerRegistry",
    "SqliteDialect",
    "StartRun",
    "StartRunResult",
    "StepCommit",
    "SubmitOutcome",
    "UsageRecord",
    "UsageRow",
    "WorkerRecord",
    "WorkerRegistry",
    "begin_read",
    "begin_write",
    "check_migrated",
    "create_engine_for",
    "dialect_for",
    "now_ms",
    "to_sqlalchemy_url",
    "upgrade",
]
