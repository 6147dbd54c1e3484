"""Checkpoint reads: a checkpoint is a pointer into the transcript, rebuilt into a full state.

A checkpoint row stores what a step left (custom state, status, output, message count, stream
sequence), not the transcript: its ``state.messages`` are the session's first ``message_count``
messages, read in the same transaction. Checkpoints are written only by ``commit_step``
(``helix_dbos.store.commit``) and dropped only by a retry's truncation (``helix_dbos.store.runs``).
"""

from __future__ import annotations

from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.checkpoint import Checkpoint, CheckpointMeta, summarize_state
from helix_dbos.session import AgentState
from helix_dbos.store.base import PaginatedCheckpoints
from helix_dbos.store.engine import begin_read
from helix_dbos.store.schema import checkpoints, sessions
from helix_dbos.store.transcript import read_prefix, read_refs

__all__ = ["get_checkpoint", "get_latest_checkpoint", "list_checkpoints"]

_NEWEST_FIRST: Final = (
    checkpoints.c.created_at.desc(),
    checkpoints.c.step_count.desc(),
    checkpoints.c.checkpoint_id.desc(),
)


def _build_checkpoint(conn: Connection, row: sa.Row[Any]) -> Checkpoint:
    state = AgentState(
        session_id=row.session_id,
        run_id=row.run_id,
        agent_type=row.agent_type,
        stream_id=row.stream_id,
        status=row.status,
        step_count=row.step_count,
        custom_state=row.custom_state,
        messages=read_prefix(conn, row.session_id, row.message_count),
        output=row.output,
        error=row.error,
        parent_session_id=row.parent_session_id,
        sub_session_refs=read_refs(conn, row.session_id),
    )
    return Checkpoint(
        id=row.checkpoint_id,
        session_id=row.session_id,
        step_count=row.step_count,
        timestamp=row.created_at,
        state=state,
        message_count=row.message_count,
        stream_sequence=row.stream_sequence,
    )


def _checkpoint_query() -> sa.Select[Any]:
    return sa.select(
        checkpoints,
        sessions.c.agent_type,
        sessions.c.stream_id,
        sessions.c.parent_session_id,
    ).join(sessions, sessions.c.session_id == checkpoints.c.session_id)


def get_checkpoint(engine: Engine, checkpoint_id: str) -> Checkpoint | None:
    """Return a checkpoint with its state (``state.messages``: the first ``message_count``)."""
    with begin_read(engine) as conn:
        row = conn.execute(_checkpoint_query().where(checkpoints.c.checkpoint_id == checkpoint_id)).first()
        return None if row is None else _build_checkpoint(conn, row)


def get_latest_checkpoint(engine: Engine, session_id: str) -> Checkpoint | None:
    """Return the newest checkpoint of the session (by time, then step)."""
    with begin_read(engine) as conn:
        row = conn.execute(
            _checkpoint_query().where(checkpoints.c.session_id == session_id).order_by(*_NEWEST_FIRST).limit(1)
        ).first()
        return None if row is None else _build_checkpoint(conn, row)


def list_checkpoints(engine: Engine, session_id: str, *, offset: int = 0, limit: int = 50) -> PaginatedCheckpoints:
    """Return checkpoint summaries, newest first (by time, then step)."""
    offset = max(offset, 0)
    limit = max(limit, 0)
    with begin_read(engine) as conn:
        total = conn.execute(
            sa.select(sa.func.count()).select_from(checkpoints).where(checkpoints.c.session_id == session_id)
        ).scalar_one()
        rows = conn.execute(
            sa.select(
                checkpoints.c.checkpoint_id,
                checkpoints.c.step_count,
                checkpoints.c.created_at,
                checkpoints.c.status,
                checkpoints.c.run_id,
                checkpoints.c.message_count,
                checkpoints.c.custom_state,
            )
            .where(checkpoints.c.session_id == session_id)
            .order_by(*_NEWEST_FIRST)
            .offset(offset)
            .limit(limit)
        ).all()
    items = [
        CheckpointMeta(
            id=row.checkpoint_id,
            session_id=session_id,
            step_count=row.step_count,
            timestamp=row.created_at,
            status=row.status,
            run_id=row.run_id,
            message_count=row.message_count,
            state_summary=summarize_state(row.custom_state or {}),
        )
        for row in rows
    ]
    return PaginatedCheckpoints(items=items, total=total, has_more=offset + len(items) < total)
