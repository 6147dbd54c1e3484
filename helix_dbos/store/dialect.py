"""What differs between PostgreSQL and SQLite, as one small interface the store is written against.

The store's modules say *what* a transaction does once; a dialect object says how its backend
spells the few statements that differ (dbos-transact-py draws the same line between
``_sys_db.py`` and ``_sys_db_postgres.py`` / ``_sys_db_sqlite.py``):

- ``INSERT .. ON CONFLICT DO NOTHING`` (both backends support it, through different SQLAlchemy
  constructs);
- locking the session row: ``SELECT .. FOR UPDATE`` on PostgreSQL; nothing on SQLite, where every
  write transaction is ``BEGIN IMMEDIATE`` and therefore already holds the database's write lock;
- serialising migrations: a transaction-scoped advisory lock on PostgreSQL; nothing on SQLite,
  whose migration transaction is ``BEGIN IMMEDIATE``;
- the statements of a step commit: one data-modifying CTE on PostgreSQL (a single round trip on the
  agent loop's hot path), a short series of statements on SQLite (in-process, where round trips
  cost nothing);
- a new session's first run: one autocommitted statement on PostgreSQL
  (:mod:`helix_dbos.store.postgres_start`), the transaction of ``start_run`` on SQLite.

The implementations are :class:`helix_dbos.store.postgres.PostgresDialect` and
:class:`helix_dbos.store.sqlite.SqliteDialect`; :func:`helix_dbos.store.engine.dialect_for` picks
one for an engine. This module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.messages import Message
from helix_dbos.store.base import StepCommit

__all__ = ["AppliedStep", "RidingStart", "RidingWrite", "SqlDialect"]


class AppliedStep(NamedTuple):
    """A step commit that applied, with the session's interrupt flag read in the same transaction."""

    checkpoint_id: str
    interrupt_requested: bool
    interrupt_context: Any
    """The stored ``interrupt_context`` JSON (``helix_dbos.store.rows.interrupt_reason`` reads it)."""


@dataclass(frozen=True)
class RidingWrite:
    """Another component's writes that ride in a step commit's own statement (PostgreSQL).

    The runtime stores a run's queued stream chunks with each step commit. On PostgreSQL the
    chunks' upsert and insert join the commit's data-modifying CTE: one statement, one round trip
    and one execution instead of two. They commit, or roll back, with the step. Other backends
    (SQLite, in process, where round trips cost nothing) take the writes as a callable instead
    (``commit_step``'s ``also``), and their dialects refuse a riding write.
    """

    ctes: str
    """``name AS (...), ...``: more CTEs for the commit's ``WITH`` list. Their names and bind
    parameters must not collide with the commit's (prefix them)."""
    columns: str
    """Select-list expressions reading those CTEs (``(SELECT x FROM name)``), appended to the commit's result row."""
    params: Mapping[str, Any]
    """The CTEs' bind parameters."""
    finish: Callable[[Connection | None, Sequence[Any]], object]
    """Called right after the statement with the values of :attr:`columns`: in the transaction, with
    its connection, or with ``None`` when the statement ran alone, which its guard allows only when
    :attr:`complete` held (so ``finish`` has nothing to write)."""
    complete: str = "true"
    """A condition over those CTEs: true when :attr:`finish` will run no statement of its own (the
    common case: every row went in). Only then can the commit run as one statement outside a
    transaction (``SqlDialect.apply_step_alone``); otherwise ``finish`` needs the transaction's locks."""


@dataclass(frozen=True)
class RidingStart:
    """A stream's part of a run's start (its first sequence, its activation) in a new session's one statement.

    The runtime starts a run's stream with its store's start (``start_run_with``). On PostgreSQL a
    new session's start is one statement (:mod:`helix_dbos.store.postgres_start`), and the stream's
    read and upsert join it as SQL, as a :class:`RidingWrite` joins a step commit: no ``BEGIN``, no
    ``COMMIT``, no round trip of their own. The statement fails whole when the session exists, the
    activation with it.
    """

    sequence: str
    """A scalar SQL expression: the stream's latest sequence (0 for a new stream), the run's first."""
    ctes: str
    """``name AS (...)``: the stream's activation as CTEs for the statement's ``WITH`` list; their
    names and bind parameters must not collide with the start's (prefix them)."""
    params: Mapping[str, Any]
    """The bind parameters of :attr:`sequence` and :attr:`ctes`."""


class SqlDialect(Protocol):
    """The statements one backend spells its own way (see the module docstring)."""

    @property
    def name(self) -> str:
        """SQLAlchemy's name of the backend: ``postgresql`` or ``sqlite``."""
        ...

    def insert_ignore(self, table: sa.Table, conflict: Sequence[str]) -> sa.Insert:
        """``INSERT .. ON CONFLICT (conflict) DO NOTHING`` on ``table``."""
        ...

    def lock_session(self, conn: Connection, session_id: str, *columns: sa.ColumnElement[Any]) -> sa.Row[Any] | None:
        """Read the session row (``columns``, default all) holding it until the transaction ends.

        ``None`` when the session does not exist. Call it inside ``begin_write``.
        """
        ...

    def lock_migrations(self, conn: Connection) -> None:
        """Hold a lock that serialises concurrent migrations until the transaction ends."""
        ...

    def apply_step(
        self, conn: Connection, commit: StepCommit, checkpoint_id: str, riding: RidingWrite | None = None
    ) -> AppliedStep | None:
        """Write everything ``commit`` holds, or nothing (``None``); and ``riding``'s writes either way.

        Applies only if the session's current run is ``commit.run_id``, its transcript has exactly
        ``commit.first_sequence`` messages and the step has no checkpoint yet; ``None`` otherwise,
        having written nothing (``helix_dbos.store.commit`` then tells a replay from a conflict)
        but the one idempotent write it makes either way: ``commit.applied_tool_call_ids`` are
        marked ``applied`` (a conflict rolls that back with the transaction). ``riding`` goes in the
        same statement (:class:`RidingWrite`); a dialect that cannot carry one raises ``ValueError``.
        """
        ...

    def apply_step_alone(
        self, engine: Engine, commit: StepCommit, checkpoint_id: str, riding: RidingWrite | None = None
    ) -> AppliedStep | None:
        """:meth:`apply_step` as one statement on its own connection, outside any transaction.

        The common case of a step commit (the step applies, ``riding``'s rows all go in) needs
        nothing but its one statement, which is atomic by itself: no ``BEGIN`` and no ``COMMIT``
        round trips. Returns ``None`` having written nothing in every other case (a re-executed or
        conflicting commit, a riding write that needs statements of its own), and at once on a
        backend without the fast path: the caller then commits the step in a transaction.
        """
        ...

    def start_new_session_alone(
        self,
        engine: Engine,
        session: dict[str, Any],
        run: dict[str, Any],
        input_messages: Sequence[Message],
        tenant: str | None,
        riding: RidingStart | None = None,
    ) -> sa.Row[Any] | None:
        """A new session's row with its first run and input, in one statement outside any transaction.

        ``session`` and ``run`` are the rows the transaction path writes (``tenant`` ``None``: the
        parent's, else the default); ``riding``'s read gives the run's ``stream_start_sequence`` and
        its activation goes in too. Returns the session row, with the run's stream start sequence as
        ``run_stream_start_sequence``; ``None`` having written nothing when the session exists, and
        at once on a backend without the statement: the caller then starts the run in a transaction.
        """
        ...
