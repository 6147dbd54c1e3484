"""SQLite's spelling of the store's dialect-specific statements (see ``helix_dbos.store.dialect``).

Every write transaction on SQLite is ``BEGIN IMMEDIATE`` (``helix_dbos.store.engine``): it holds
the database's write lock from its first statement, so writers are serialised and no row lock is
needed. A step commit is a short series of statements, gated like PostgreSQL's single statement by
the session update: in-process, a round trip costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import sqlite

from helix_dbos.messages import Message
from helix_dbos.store.base import StepCommit
from helix_dbos.store.dialect import AppliedStep, RidingStart, RidingWrite
from helix_dbos.store.rows import TERMINAL_RUN_STATUSES
from helix_dbos.store.schema import MARK_APPLIED, checkpoints, runs, sessions, usage
from helix_dbos.store.transcript import insert_messages

__all__ = ["SQLITE", "SqliteDialect"]


class SqliteDialect:
    """:class:`~helix_dbos.store.dialect.SqlDialect` for SQLite."""

    @property
    def name(self) -> str:
        """``sqlite``."""
        return "sqlite"

    def insert_ignore(self, table: sa.Table, conflict: Sequence[str]) -> sa.Insert:
        """``INSERT .. ON CONFLICT (conflict) DO NOTHING``."""
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(conflict))

    def lock_session(self, conn: Connection, session_id: str, *columns: sa.ColumnElement[Any]) -> sa.Row[Any] | None:
        """A plain read: the ``BEGIN IMMEDIATE`` transaction already holds the write lock."""
        query = sa.select(*columns) if columns else sa.select(sessions)
        return conn.execute(query.where(sessions.c.session_id == session_id)).first()

    def lock_migrations(self, conn: Connection) -> None:
        """Nothing to do: the migration's ``BEGIN IMMEDIATE`` transaction holds the write lock."""

    def start_new_session_alone(
        self,
        engine: Engine,
        session: dict[str, Any],
        run: dict[str, Any],
        input_messages: Sequence[Message],
        tenant: str | None,
        riding: RidingStart | None = None,
    ) -> sa.Row[Any] | None:
        """``None`` at once: a start on SQLite is its transaction (in process, round trips cost nothing)."""
        return None

    def apply_step_alone(
        self, engine: Engine, commit: StepCommit, checkpoint_id: str, riding: RidingWrite | None = None
    ) -> AppliedStep | None:
        """``None`` at once: SQLite's commit is several statements, under ``BEGIN IMMEDIATE``'s write lock."""
        return None

    def apply_step(
        self, conn: Connection, commit: StepCommit, checkpoint_id: str, riding: RidingWrite | None = None
    ) -> AppliedStep | None:
        """Mark the step's answers applied, gate on the session update, then write the rest.

        A :class:`RidingWrite` is refused: SQLite's writers hand their rows to a commit as a callable
        (in process, a statement of their own costs no round trip).
        """
        if riding is not None:
            raise ValueError("SQLite cannot carry a riding write; pass the writes as a callable")
        if commit.applied_tool_call_ids:
            conn.execute(MARK_APPLIED, {"sid": commit.session_id, "ids": commit.applied_tool_call_ids})
        sid = commit.session_id
        now = commit.now_ms
        message_count = commit.first_sequence + len(commit.messages)
        values: dict[str, Any] = {
            "custom_state": commit.custom_state,
            "step_count": commit.step_count,
            "message_count": message_count,
            "version": sessions.c.version + 1,
            "updated_at": now,
        }
        if commit.session_status is not None:
            values.update(
                status=commit.session_status,
                output=commit.output,
                error=commit.error,
                interrupt_requested=False,
            )
        already = sa.exists().where(
            checkpoints.c.session_id == sid,
            checkpoints.c.run_id == commit.run_id,
            checkpoints.c.step_count == commit.step_count,
        )
        flags = conn.execute(
            sa.update(sessions)
            .where(
                sessions.c.session_id == sid,
                sessions.c.run_id == commit.run_id,
                sessions.c.message_count == commit.first_sequence,
                ~already,
            )
            .values(values)
            .returning(sessions.c.interrupt_requested, sessions.c.interrupt_context)
        ).first()
        if flags is None:
            return None
        conn.execute(
            checkpoints.insert().values(
                checkpoint_id=checkpoint_id,
                session_id=sid,
                run_id=commit.run_id,
                step_count=commit.step_count,
                created_at=now,
                status=commit.checkpoint_status,
                custom_state=commit.custom_state,
                output=commit.output,
                error=commit.error,
                message_count=message_count,
                stream_sequence=commit.stream_sequence,
            )
        )
        insert_messages(conn, sid, commit.run_id, commit.step_count, commit.first_sequence, commit.messages, now)
        run_values: dict[str, Any] = {"step_count": commit.step_count}
        if commit.run_status is not None:
            run_values.update(
                status=commit.run_status,
                error=commit.error,
                completed_at=now if commit.run_status in TERMINAL_RUN_STATUSES else None,
            )
        conn.execute(sa.update(runs).where(runs.c.run_id == commit.run_id).values(run_values))
        if commit.usage:
            conn.execute(
                self.insert_ignore(usage, ["session_id", "run_id", "step", "kind", "name", "ordinal"]),
                [
                    {
                        **record.model_dump(),
                        "session_id": sid,
                        "run_id": commit.run_id,
                        "ordinal": ordinal,
                        "created_at": now,
                    }
                    for ordinal, record in enumerate(commit.usage)
                ],
            )
        return AppliedStep(checkpoint_id, bool(flags.interrupt_requested), flags.interrupt_context)


SQLITE: Final = SqliteDialect()
"""The dialect object (stateless: one is enough)."""
