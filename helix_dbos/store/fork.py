"""Forking: a new session branched from a checkpoint of another, in one transaction.

A checkpoint is a pointer into its session's transcript (``helix_dbos.store.checkpoints``): its
messages are the first ``message_count`` of the session, which are never rewritten while the
checkpoint exists (a retry deletes later messages together with the checkpoints that saw them).
So a fork is a copy of that prefix (``INSERT .. SELECT`` on the server, never through Python), a new
session row carrying the checkpoint's custom state, output and error, and one checkpoint of the
fork's own at the branch point.

The source session row is locked for the copy (``SqlDialect.lock_session``), so a retry on the
source cannot truncate the prefix half-way through it; the lock is held for the copy alone, and a
run in flight on the source only waits that long for its next step commit.

A fork is idempotent by its new session id: the fork's ``metadata`` records its source
(:data:`~helix_dbos.store.base.FORK_METADATA_KEY`), and a repeat of the same request finds it there.
Everything here is dialect-neutral SQLAlchemy Core.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.checkpoint import generate_checkpoint_id
from helix_dbos.errors import CheckpointNotFoundError, ForkConflictError, SessionNotFoundError
from helix_dbos.session import AgentStatus
from helix_dbos.store.base import FORK_METADATA_KEY, ForkResult, ForkSession
from helix_dbos.store.dialect import SqlDialect
from helix_dbos.store.engine import begin_write
from helix_dbos.store.rows import new_session_values, session_record
from helix_dbos.store.schema import checkpoints, messages, sessions
from helix_dbos.store.transcript import insert_messages

__all__ = ["fork_session"]


def fork_session(engine: Engine, dialect: SqlDialect, request: ForkSession) -> ForkResult:
    """Branch ``request.new_session_id`` from ``request.checkpoint_id`` (rules: ``SessionStore.fork_session``)."""
    with begin_write(engine) as conn:
        existing = _existing_fork(conn, request)
        if existing is not None:
            return existing
        if dialect.lock_session(conn, request.source_session_id, sessions.c.session_id) is None:
            raise SessionNotFoundError(request.source_session_id)
        source = conn.execute(
            sa.select(sessions.c.agent_type, sessions.c.agent_fingerprint, sessions.c.tenant).where(
                sessions.c.session_id == request.source_session_id
            )
        ).one()
        checkpoint = conn.execute(
            sa.select(checkpoints).where(
                checkpoints.c.checkpoint_id == request.checkpoint_id,
                checkpoints.c.session_id == request.source_session_id,
            )
        ).first()
        if checkpoint is None:
            raise CheckpointNotFoundError(request.source_session_id, request.checkpoint_id)
        fork_checkpoint_id = generate_checkpoint_id(
            request.new_session_id, checkpoint.step_count, timestamp_ms=request.now_ms
        )
        kept = checkpoint.message_count
        if request.keep_message_count is not None:
            kept = min(request.keep_message_count, kept)
        message_count = kept + len(request.extra_messages)
        custom_state = checkpoint.custom_state if request.custom_state is None else request.custom_state
        values = new_session_values(
            request.new_session_id,
            agent_type=source.agent_type,
            custom_state=custom_state,
            now_ms=request.now_ms,
            parent_session_id=None,
            root_session_id=None,
            tenant=source.tenant,  # a fork is its source's tenant's, whoever asks for it
            metadata={
                FORK_METADATA_KEY: {
                    "session_id": request.source_session_id,
                    "checkpoint_id": request.checkpoint_id,
                    "fork_checkpoint_id": fork_checkpoint_id,
                    **request.provenance,
                }
            },
        )
        values.update(
            status=request.status,
            step_count=checkpoint.step_count,
            message_count=message_count,
            output=checkpoint.output,
            error=checkpoint.error,
            agent_fingerprint=source.agent_fingerprint,
        )
        row = conn.execute(
            dialect.insert_ignore(sessions, ["session_id"]).values(values).returning(*sessions.c)
        ).first()
        if row is None:  # created by a concurrent request after our look (it has committed): decide on it
            existing = _existing_fork(conn, request)
            if existing is None:
                raise ForkConflictError(request.new_session_id, "a session with this id was created concurrently")
            return existing
        _copy_prefix(conn, request, kept)
        insert_messages(
            conn,
            request.new_session_id,
            None,
            checkpoint.step_count,
            kept,
            request.extra_messages,
            request.now_ms,
        )
        fork_status: AgentStatus = "failed" if request.status == "failed" else "completed"
        conn.execute(
            sa.insert(checkpoints).values(
                checkpoint_id=fork_checkpoint_id,
                session_id=request.new_session_id,
                run_id=checkpoint.run_id,
                step_count=checkpoint.step_count,
                created_at=request.now_ms,
                status=fork_status,
                custom_state=custom_state,
                output=checkpoint.output,
                error=checkpoint.error,
                message_count=message_count,
                stream_sequence=0,
            )
        )
        return ForkResult(
            session=session_record(row),
            source_session_id=request.source_session_id,
            checkpoint_id=request.checkpoint_id,
            fork_checkpoint_id=fork_checkpoint_id,
            created=True,
        )


def _existing_fork(conn: Connection, request: ForkSession) -> ForkResult | None:
    """The fork a repeat of ``request`` made before; :class:`ForkConflictError` if the id is taken otherwise."""
    row = conn.execute(sa.select(sessions).where(sessions.c.session_id == request.new_session_id)).first()
    if row is None:
        return None
    session = session_record(row)
    source = session.forked_from
    if (
        source is None
        or source.get("session_id") != request.source_session_id
        or source.get("checkpoint_id") != request.checkpoint_id
    ):
        raise ForkConflictError(
            request.new_session_id, "that session exists and is not a fork of this session at this checkpoint"
        )
    return ForkResult(
        session=session,
        source_session_id=request.source_session_id,
        checkpoint_id=request.checkpoint_id,
        fork_checkpoint_id=str(source.get("fork_checkpoint_id", "")),
        created=False,
    )


def _copy_prefix(conn: Connection, request: ForkSession, count: int) -> None:
    """Copy the source's first ``count`` messages under the fork's id, on the server."""
    columns = ["session_id", "sequence", "run_id", "step", "role", "message", "created_at"]
    source = sa.select(
        sa.literal(request.new_session_id, sa.String()).label("session_id"),
        messages.c.sequence,
        messages.c.run_id,
        messages.c.step,
        messages.c.role,
        messages.c.message,
        messages.c.created_at,
    ).where(messages.c.session_id == request.source_session_id, messages.c.sequence < count)
    conn.execute(sa.insert(messages).from_select(columns, source))
