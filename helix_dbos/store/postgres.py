"""PostgreSQL's spelling of the store's dialect-specific statements (see ``helix_dbos.store.dialect``).

A step commit is one statement: the session update goes first and is the gate (it applies only if
the step is not committed yet and the transcript is exactly where the commit starts), and the
checkpoint, messages, run and usage writes hang off its ``RETURNING`` row. The HITL answers the
step turned into results are marked ``applied`` in the same statement, gate or not (idempotent).
A concurrent duplicate blocks on the session row lock and then fails the gate. Another writer's
rows that must commit with the step (the run's stream chunks) can join the same statement as a
:class:`~helix_dbos.store.dialect.RidingWrite`: more CTEs and result columns, still one round trip.
In the common case the statement runs alone on an autocommit connection (``apply_step_alone``), so
the round trip is the only one: no ``BEGIN`` and no ``COMMIT``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import postgresql

from helix_dbos.messages import Message
from helix_dbos.store import alone, codec, postgres_start
from helix_dbos.store.base import StepCommit
from helix_dbos.store.dialect import AppliedStep, RidingStart, RidingWrite
from helix_dbos.store.rows import TERMINAL_RUN_STATUSES, dump_message
from helix_dbos.store.schema import sessions

__all__ = ["COMMIT_STEP_ALONE", "MIGRATION_LOCK_KEY", "POSTGRES", "PostgresDialect", "commit_carrying"]

MIGRATION_LOCK_KEY: Final = 0x6865_6C69_7864_6200 >> 1
"""Key of the PostgreSQL advisory lock held while migrating ("helixdb" in hex, kept positive)."""

_COMMIT_CTES: Final = """
WITH s AS (
    UPDATE helix_sessions SET
        custom_state = CAST(:custom_state AS jsonb),
        step_count = :step,
        message_count = :message_count,
        version = version + 1,
        updated_at = :now,
        status = CASE WHEN :final THEN CAST(:status AS varchar) ELSE status END,
        output = CASE WHEN :final THEN CAST(:output AS jsonb) ELSE output END,
        error = CASE WHEN :final THEN CAST(:error AS text) ELSE error END,
        interrupt_requested = CASE WHEN :final THEN false ELSE interrupt_requested END
    WHERE session_id = :sid AND run_id = :rid AND message_count = :first
      AND NOT EXISTS (
          SELECT 1 FROM helix_checkpoints c
          WHERE c.session_id = :sid AND c.run_id = :rid AND c.step_count = :step)
    RETURNING interrupt_requested, interrupt_context
), cp AS (
    INSERT INTO helix_checkpoints (checkpoint_id, session_id, run_id, step_count, created_at, status,
                                   custom_state, output, error, message_count, stream_sequence)
    SELECT :checkpoint_id, :sid, :rid, :step, :now, :checkpoint_status, CAST(:custom_state AS jsonb),
           CAST(:output AS jsonb), CAST(:error AS text), :message_count, :stream_sequence
    FROM s
    ON CONFLICT (session_id, run_id, step_count) DO NOTHING
    RETURNING checkpoint_id
), m AS (
    INSERT INTO helix_messages (session_id, sequence, run_id, step, role, message, created_at)
    SELECT :sid, :first + t.ord - 1, :rid, :step, t.x ->> 'role', t.x, :now
    FROM json_array_elements(CAST(:messages AS json)) WITH ORDINALITY AS t(x, ord)
    WHERE EXISTS (SELECT 1 FROM s)
), r AS (
    UPDATE helix_runs SET
        step_count = :step,
        status = COALESCE(CAST(:run_status AS varchar), status),
        error = CASE WHEN CAST(:run_status AS varchar) IS NOT NULL THEN CAST(:error AS text) ELSE error END,
        completed_at = CASE WHEN :run_terminal THEN CAST(:now AS bigint)
                            WHEN CAST(:run_status AS varchar) IS NOT NULL THEN NULL
                            ELSE completed_at END
    WHERE run_id = :rid AND EXISTS (SELECT 1 FROM s)
), u AS (
    INSERT INTO helix_usage (session_id, run_id, step, kind, name, ordinal, input_tokens, output_tokens,
                             cached_input_tokens, reasoning_tokens, value, success, created_at, cost_usd)
    SELECT :sid, :rid, x.step, x.kind, x.name, x.ordinal, x.input_tokens, x.output_tokens,
           x.cached_input_tokens, x.reasoning_tokens, x.value, x.success, :now, x.cost_usd
    FROM json_to_recordset(CAST(:usage AS json)) AS x(
        step int, kind text, name text, ordinal int, input_tokens bigint, output_tokens bigint,
        cached_input_tokens bigint, reasoning_tokens bigint, value float8, success boolean, cost_usd float8)
    WHERE EXISTS (SELECT 1 FROM s)
    ON CONFLICT DO NOTHING
), a AS (
    UPDATE helix_pending_tool_calls SET status = 'applied'
    WHERE session_id = :sid AND tool_call_id = ANY(CAST(:applied AS text[])) AND status IN ('answered', 'expired')
)"""

_COMMIT_RESULT: Final = """
SELECT (SELECT checkpoint_id FROM cp) AS checkpoint_id, s.interrupt_requested, s.interrupt_context{guard}{riding}
FROM (SELECT 1) AS one LEFT JOIN s ON true
"""
"""The result row. It is built on the join with ``s`` (the session update) before its columns read
``cp`` or a :class:`RidingWrite`'s CTEs, so the session row is locked before anything the riding
writes lock: the order every other writer of a session takes."""

_ALONE_GUARD: Final = ", 1 / CAST(EXISTS (SELECT 1 FROM s) AND ({complete}) AS int)"
"""The column that makes a commit outside a transaction all or nothing (``apply_step_alone``).

It divides by zero, failing the statement and so undoing every write of its CTEs, unless the step
applied and the riding write is complete. In every other case the commit needs a transaction: a
conflict must not keep the answers ``a`` marked applied, and a riding write's ``finish`` runs
statements under the row locks its CTEs took. The divisor depends on the CTEs' results, so the
planner cannot fold it into an error at plan time."""


def _compact(sql: str) -> str:
    """``sql`` without the layout: runs of whitespace made one space, none around operators and brackets.

    No space is kept around ``(``, ``)``, ``,``, ``=``, ``+``, ``<``, ``>``, ``->``, ``->>`` or ``||``.
    psycopg parses a statement's placeholders in Python on every execution unless the statement is
    at most 4096 characters long, when it caches the parse. The step commit carrying a stream's
    chunks is over that with its layout and under it without (a test pins it), which saves that
    parse on every step. The statements hold no string literal that this would change, and no ``-``
    is touched (two could make a comment).
    """
    return re.sub(r" ?(->>|->|\|\||[(),=+<>]) ?", r"\1", re.sub(r"\s+", " ", sql).strip())


COMMIT_STEP: Final = sa.text(_compact(_COMMIT_CTES + _COMMIT_RESULT.format(guard="", riding="")))
"""A step commit in one round trip (see the module docstring); parameters from ``_commit_params``."""

COMMIT_STEP_ALONE: Final = sa.text(
    _compact(_COMMIT_CTES + _COMMIT_RESULT.format(guard=_ALONE_GUARD.format(complete="true"), riding=""))
)
""":data:`COMMIT_STEP` that fails unless it applies (:data:`_ALONE_GUARD`): for ``apply_step_alone``."""


@functools.lru_cache(maxsize=8)
def commit_carrying(ctes: str, columns: str, complete: str | None = None) -> sa.TextClause:
    """:data:`COMMIT_STEP` with a :class:`RidingWrite`'s CTEs and columns (its text is constant per writer).

    With ``complete`` (:attr:`RidingWrite.complete`), the statement carries :data:`_ALONE_GUARD`.
    """
    guard = "" if complete is None else _ALONE_GUARD.format(complete=complete)
    return sa.text(_compact(f"{_COMMIT_CTES}, {ctes}{_COMMIT_RESULT.format(guard=guard, riding=', ' + columns)}"))


_LOCK_SESSION: Final = sa.select(sessions).where(sessions.c.session_id == sa.bindparam("sid")).with_for_update()
"""The whole session row, locked; built once (a run start and every HITL answer take it)."""


def _commit_params(commit: StepCommit, checkpoint_id: str) -> dict[str, Any]:
    # JSON goes in as text through the codec (the column types' serialiser is bypassed by raw SQL).
    return {
        "sid": commit.session_id,
        "rid": commit.run_id,
        "step": commit.step_count,
        "first": commit.first_sequence,
        "message_count": commit.first_sequence + len(commit.messages),
        "now": commit.now_ms,
        "custom_state": codec.dumps(commit.custom_state),
        "final": commit.session_status is not None,
        "status": commit.session_status,
        "output": codec.dumps(commit.output),
        "error": None if commit.error is None else codec.escape_text(commit.error),
        "run_status": commit.run_status,
        "run_terminal": commit.run_status in TERMINAL_RUN_STATUSES,
        "checkpoint_id": checkpoint_id,
        "checkpoint_status": commit.checkpoint_status,
        "stream_sequence": commit.stream_sequence,
        "messages": codec.dumps([dump_message(m) for m in commit.messages]),
        "usage": codec.dumps([{**record.model_dump(), "ordinal": i} for i, record in enumerate(commit.usage)]),
        "applied": list(commit.applied_tool_call_ids),
    }


class PostgresDialect:
    """:class:`~helix_dbos.store.dialect.SqlDialect` for PostgreSQL (psycopg 3)."""

    @property
    def name(self) -> str:
        """``postgresql``."""
        return "postgresql"

    def insert_ignore(self, table: sa.Table, conflict: Sequence[str]) -> sa.Insert:
        """``INSERT .. ON CONFLICT (conflict) DO NOTHING``."""
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(conflict))

    def lock_session(self, conn: Connection, session_id: str, *columns: sa.ColumnElement[Any]) -> sa.Row[Any] | None:
        """``SELECT .. FOR UPDATE`` of the session row: writers of one session queue here."""
        if not columns:
            return conn.execute(_LOCK_SESSION, {"sid": session_id}).first()
        query = sa.select(*columns).where(sessions.c.session_id == session_id).with_for_update()
        return conn.execute(query).first()

    def lock_migrations(self, conn: Connection) -> None:
        """``pg_advisory_xact_lock``: concurrent upgraders queue, the first creates the tables."""
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})

    def apply_step(
        self, conn: Connection, commit: StepCommit, checkpoint_id: str, riding: RidingWrite | None = None
    ) -> AppliedStep | None:
        """The step commit as the one statement :data:`COMMIT_STEP`, ``riding``'s writes in it."""
        params = _commit_params(commit, checkpoint_id)
        if riding is None:
            row = conn.execute(COMMIT_STEP, params).one()
        else:
            if not riding.params.keys().isdisjoint(params):
                raise ValueError(
                    f"riding parameters {sorted(riding.params.keys() & params.keys())} collide with the commit's"
                )
            row = conn.execute(commit_carrying(riding.ctes, riding.columns), {**params, **riding.params}).one()
            riding.finish(conn, tuple(row)[3:])
        if row.checkpoint_id is None:
            return None
        return AppliedStep(row.checkpoint_id, bool(row.interrupt_requested), row.interrupt_context)

    def apply_step_alone(
        self, engine: Engine, commit: StepCommit, checkpoint_id: str, riding: RidingWrite | None = None
    ) -> AppliedStep | None:
        """The step commit as one autocommitted statement that applies whole or fails whole (:data:`_ALONE_GUARD`).

        ``None`` when the guard failed it: nothing was written, and the caller commits in a transaction.
        """
        params = _commit_params(commit, checkpoint_id)
        if riding is not None:
            if not riding.params.keys().isdisjoint(params):
                raise ValueError(
                    f"riding parameters {sorted(riding.params.keys() & params.keys())} collide with the commit's"
                )
            statement = commit_carrying(riding.ctes, riding.columns, riding.complete)
            params = {**params, **riding.params}
        else:
            statement = COMMIT_STEP_ALONE
        row = alone.run_alone(engine, statement, params)
        if row is None:
            return None  # the guard: not the common case, and nothing was written
        checkpoint, interrupt_requested, interrupt_context = row[:3]
        if riding is not None:
            riding.finish(None, row[4:])  # ran alone: its guard held, so finish has nothing to write
        return AppliedStep(checkpoint, bool(interrupt_requested), interrupt_context)

    def start_new_session_alone(
        self,
        engine: Engine,
        session: dict[str, Any],
        run: dict[str, Any],
        input_messages: Sequence[Message],
        tenant: str | None,
        riding: RidingStart | None = None,
    ) -> sa.Row[Any] | None:
        """The start as one autocommitted statement (:mod:`helix_dbos.store.postgres_start`)."""
        statement = (
            postgres_start.start_statement(":stream_start_sequence", "")
            if riding is None
            else postgres_start.start_statement(riding.sequence, riding.ctes)
        )
        params = postgres_start.start_params(session, run, input_messages, tenant, riding)
        return postgres_start.run_alone(engine, statement, params)


POSTGRES: Final = PostgresDialect()
"""The dialect object (stateless: one is enough)."""
