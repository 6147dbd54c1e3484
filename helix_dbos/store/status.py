"""The session's status and interrupt flag: compare-and-set updates of the session row.

Each operation is one guarded ``UPDATE`` (or a locked read and an update) in one transaction, so
concurrent callers are decided by the database: a compare-and-set that misses changes nothing and
reports what it found. An interrupt request is a durable flag the running loop reads in the result
of its next step commit (``helix_dbos.store.commit``).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from helix_dbos.errors import SessionNotFoundError
from helix_dbos.session import InterruptContext, SessionStatus
from helix_dbos.store.base import CasResult
from helix_dbos.store.dialect import SqlDialect
from helix_dbos.store.engine import begin_write
from helix_dbos.store.engine import now_ms as clock_ms  # parameters named now_ms would shadow it
from helix_dbos.store.rows import context_json
from helix_dbos.store.schema import sessions

__all__ = ["clear_interrupt", "compare_and_set_status", "increment_resume_count", "request_interrupt"]


def compare_and_set_status(
    engine: Engine,
    session_id: str,
    expected_statuses: list[SessionStatus],
    new_status: SessionStatus,
    *,
    expected_version: int | None = None,
    error: str | None = None,
    interrupt_context: InterruptContext | None = None,
) -> CasResult:
    """Set the status only if it is one of ``expected_statuses`` (and at ``expected_version``).

    One guarded ``UPDATE .. RETURNING``; on a miss the current status and version are read
    back so the caller can decide what to do. ``error`` and ``interrupt_context`` are written
    only when given. An unknown session raises :class:`SessionNotFoundError`.
    """
    values: dict[str, Any] = {
        "status": new_status,
        "version": sessions.c.version + 1,
        "updated_at": clock_ms(),
    }
    if error is not None:
        values["error"] = error
    if interrupt_context is not None:
        values["interrupt_context"] = context_json(interrupt_context)
    stmt = sa.update(sessions).where(sessions.c.session_id == session_id, sessions.c.status.in_(expected_statuses))
    if expected_version is not None:
        stmt = stmt.where(sessions.c.version == expected_version)
    with begin_write(engine) as conn:
        new_version = conn.execute(stmt.values(values).returning(sessions.c.version)).scalar_one_or_none()
        if new_version is not None:
            return CasResult(ok=True, new_version=new_version)
        current = conn.execute(
            sa.select(sessions.c.status, sessions.c.version).where(sessions.c.session_id == session_id)
        ).first()
    if current is None:
        raise SessionNotFoundError(session_id)
    return CasResult(ok=False, current_status=current.status, current_version=current.version)


def request_interrupt(engine: Engine, dialect: SqlDialect, session_id: str, reason: str | None, *, now_ms: int) -> bool:
    """Durably flag an interrupt for an active session; False when it is not active (or absent).

    The running loop sees the flag in the result of its next :func:`helix_dbos.store.commit.commit_step`.
    """
    with begin_write(engine) as conn:
        row = dialect.lock_session(conn, session_id, sessions.c.status, sessions.c.step_count)
        if row is None or row.status != "active":
            return False
        context = InterruptContext(reason=reason, step_count=row.step_count, timestamp=now_ms)
        result = conn.execute(
            sa.update(sessions)
            .where(sessions.c.session_id == session_id, sessions.c.status == "active")
            .values(
                interrupt_requested=True,
                interrupt_context=context_json(context),
                version=sessions.c.version + 1,
                updated_at=now_ms,
            )
        )
        return result.rowcount > 0


def clear_interrupt(engine: Engine, session_id: str) -> None:
    """Clear a pending interrupt flag (the context stays as the record of the last request)."""
    with begin_write(engine) as conn:
        conn.execute(
            sa.update(sessions)
            .where(sessions.c.session_id == session_id, sessions.c.interrupt_requested.is_(True))
            .values(interrupt_requested=False, version=sessions.c.version + 1, updated_at=clock_ms())
        )


def increment_resume_count(engine: Engine, session_id: str) -> int:
    """Add one to the session's resume counter and return the new value."""
    with begin_write(engine) as conn:
        count = conn.execute(
            sa.update(sessions)
            .where(sessions.c.session_id == session_id)
            .values(
                resume_count=sessions.c.resume_count + 1,
                version=sessions.c.version + 1,
                updated_at=clock_ms(),
            )
            .returning(sessions.c.resume_count)
        ).scalar_one_or_none()
    if count is None:
        raise SessionNotFoundError(session_id)
    return int(count)
