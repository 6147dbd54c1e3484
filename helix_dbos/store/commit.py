"""``commit_step``: everything one loop iteration produced, in one transaction, exactly once.

On PostgreSQL the common case (the step applies, its riding rows all go in) is one statement on an
autocommit connection, atomic by itself: no ``BEGIN`` / ``COMMIT`` round trips
(``SqlDialect.apply_step_alone``). It fails whole when the case is not the common one, and the
commit then runs in a transaction as below.

The step's checkpoint is keyed by ``(session_id, run_id, step_count)``. The dialect's
``apply_step`` (``helix_dbos.store.dialect``) writes the session update, checkpoint, messages, run
and usage only when the session update's guard holds: the session is still on this run, its
transcript has exactly ``first_sequence`` messages, and the step has no checkpoint yet. When
nothing applied, one read tells a re-executed commit (the checkpoint exists: a no-op that returns
the first commit's id and the current interrupt flag) from a conflict (a superseded run, a missing
session, a sequence gap), which raises and rolls back.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.checkpoint import generate_checkpoint_id
from helix_dbos.errors import ExecutorSupersededError, HelixError, SessionNotFoundError
from helix_dbos.store.base import CommitResult, StepCommit
from helix_dbos.store.dialect import AppliedStep, RidingWrite, SqlDialect
from helix_dbos.store.engine import begin_write
from helix_dbos.store.rows import interrupt_reason
from helix_dbos.store.schema import checkpoints, sessions

__all__ = ["commit_step"]


def commit_step(
    engine: Engine,
    dialect: SqlDialect,
    commit: StepCommit,
    *,
    also: Callable[[Connection], object] | RidingWrite | None = None,
) -> CommitResult:
    """Commit one loop iteration atomically and idempotently (see the module docstring).

    Raises :class:`ExecutorSupersededError` when the session has moved on to another run,
    :class:`SessionNotFoundError`, or a ``HelixError`` on a sequence gap (a runtime bug); all of
    them roll the commit back. ``also``: a caller's rows that must commit with the step, written
    whether the step's writes went in or were found already there. A :class:`RidingWrite` goes in
    the commit's own statement where the dialect can; ``also(conn)`` runs after the step's writes.
    """
    checkpoint_id = generate_checkpoint_id(commit.session_id, commit.step_count, timestamp_ms=commit.now_ms)
    riding, after = (also, None) if isinstance(also, RidingWrite) else (None, also)
    if after is None:  # a callable runs statements of its own: it needs the transaction
        applied = dialect.apply_step_alone(engine, commit, checkpoint_id, riding)
        if applied is not None:
            return _applied(applied)
    with begin_write(engine) as conn:
        applied = dialect.apply_step(conn, commit, checkpoint_id, riding)
        if applied is not None:
            result = _applied(applied)
        else:
            already = _already_committed(conn, commit)
            if already is None:
                raise _commit_conflict(conn, commit)
            result = already
        if after is not None:
            after(conn)
        return result


def _applied(applied: AppliedStep) -> CommitResult:
    requested = applied.interrupt_requested
    return CommitResult.model_construct(
        checkpoint_id=applied.checkpoint_id,
        applied=True,
        interrupt_requested=requested,
        interrupt_reason=interrupt_reason(applied.interrupt_context) if requested else None,
    )


def _already_committed(conn: Connection, commit: StepCommit) -> CommitResult | None:
    row = conn.execute(
        sa.select(checkpoints.c.checkpoint_id, sessions.c.interrupt_requested, sessions.c.interrupt_context)
        .select_from(checkpoints)
        .join(sessions, sessions.c.session_id == checkpoints.c.session_id, isouter=True)
        .where(
            checkpoints.c.session_id == commit.session_id,
            checkpoints.c.run_id == commit.run_id,
            checkpoints.c.step_count == commit.step_count,
        )
    ).first()
    if row is None:
        return None
    requested = bool(row.interrupt_requested)
    return CommitResult(
        checkpoint_id=row.checkpoint_id,
        applied=False,
        interrupt_requested=requested,
        interrupt_reason=interrupt_reason(row.interrupt_context) if requested else None,
    )


def _commit_conflict(conn: Connection, commit: StepCommit) -> HelixError:
    current = conn.execute(
        sa.select(sessions.c.run_id, sessions.c.message_count).where(sessions.c.session_id == commit.session_id)
    ).first()
    if current is None:
        return SessionNotFoundError(commit.session_id)
    if current.run_id != commit.run_id:
        return ExecutorSupersededError(commit.session_id)
    return HelixError(
        f"Sequence gap in session {commit.session_id!r}: step {commit.step_count} of run "
        f"{commit.run_id!r} starts at sequence {commit.first_sequence}, but the transcript has "
        f"{current.message_count} messages",
        code="framework_internal_error",
    )
