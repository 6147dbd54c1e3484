"""The SQL session store: :class:`SqlSessionStore`, one implementation for PostgreSQL and SQLite.

Each :class:`~helix_dbos.store.base.SessionStore` operation is one short transaction, retried
whole on a transient database error (``helix_dbos.store.retry``). Concurrency is decided by the
database, never by a read-then-write in Python:

- ``create_session`` is ``INSERT .. ON CONFLICT DO NOTHING``: the row either appears or it did not.
- ``start_run`` locks the session row and still guards its update with the version it read
  (``helix_dbos.store.runs``).
- ``commit_step`` applies only while the session is on the committing run, at the commit's first
  sequence, with no checkpoint for the step yet; otherwise it is a no-op (a replay) or a conflict
  that rolls back (``helix_dbos.store.commit``).

This module holds the facade and the operations on the session row itself (lifecycle, transcript
reads, status, interrupts, sub-session refs, usage); runs, step commits and checkpoints live in
their own modules, and what PostgreSQL and SQLite spell differently in ``postgres.py`` /
``sqlite.py`` (``helix_dbos.store.dialect``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.checkpoint import Checkpoint
from helix_dbos.errors import SessionAlreadyExistsError, SessionNotFoundError
from helix_dbos.messages import Message, strip_thinking
from helix_dbos.session import (
    AgentState,
    InterruptContext,
    RunStatus,
    SessionStatus,
    SubSessionRef,
    session_status_to_agent_status,
)
from helix_dbos.store import checkpoints as checkpoint_reads
from helix_dbos.store import fork as fork_ops
from helix_dbos.store import runs as run_ops
from helix_dbos.store import status as status_ops
from helix_dbos.store import tenants as tenant_ops
from helix_dbos.store.base import (
    CasResult,
    CommitResult,
    ForkResult,
    ForkSession,
    PaginatedCheckpoints,
    PaginatedMessages,
    RunRecord,
    SessionRecord,
    StartRun,
    StartRunResult,
    StepCommit,
    TenantSpend,
    UsageRow,
)
from helix_dbos.store.commit import commit_step
from helix_dbos.store.dialect import RidingStart, RidingWrite
from helix_dbos.store.engine import begin_read, begin_write, create_engine_for, dialect_for
from helix_dbos.store.engine import now_ms as clock_ms  # parameters named now_ms would shadow it
from helix_dbos.store.hitl import SqlPendingCallStore
from helix_dbos.store.migrate import check_migrated
from helix_dbos.store.retry import RetryPolicy, retrying
from helix_dbos.store.rows import load_message, new_session_values, session_record, usage_record
from helix_dbos.store.schema import checkpoints, messages, runs, sessions, sub_session_refs, usage
from helix_dbos.store.transcript import read_prefix, read_refs
from helix_dbos.store.usage_reads import read_usage_unless_delegated
from helix_dbos.store.workers import SqlWorkerRegistry
from helix_dbos.tenancy import DEFAULT_TENANT, check_tenant

if TYPE_CHECKING:
    from helix_dbos.store.base import SessionStore

__all__ = ["SqlSessionStore"]


_SESSION_ROW: Final = sa.select(sessions).where(sessions.c.session_id == sa.bindparam("sid"))
"""Built once: the most frequent read (every run start, every handle lookup)."""


class SqlSessionStore:
    """:class:`~helix_dbos.store.base.SessionStore` on PostgreSQL or SQLite.

    ``database_url`` is a URL (``postgresql://...``, ``postgresql+psycopg://...``,
    ``sqlite:///path``) or an engine you own; an engine passed in is not disposed by
    :meth:`close`. (Build SQLite engines with :func:`create_engine_for`: the store relies on the
    ``BEGIN IMMEDIATE`` hook it installs.) The constructor checks that the schema is at the
    revision this package expects and raises :class:`~helix_dbos.errors.DatabaseNotMigratedError`
    otherwise; ``check_schema=False`` skips that query for callers that just checked. ``retry`` is
    how operations ride out transient database errors: ``RetryPolicy()`` (120 s) unless given, never
    the environment (``launch()`` passes ``HelixSettings.retry_policy``).
    """

    def __init__(
        self, database_url: str | Engine, *, check_schema: bool = True, retry: RetryPolicy | None = None
    ) -> None:
        self._retry = retry if retry is not None else RetryPolicy()
        if isinstance(database_url, Engine):
            self._engine = database_url
            self._owns_engine = False
        else:
            self._engine = create_engine_for(database_url)
            self._owns_engine = True
        try:
            self._dialect = dialect_for(self._engine)
            self._pending = SqlPendingCallStore(self._engine, retry=self._retry)
            if check_schema:
                check_migrated(self._engine, self.url)
        except BaseException:
            self.close()
            raise

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (shared with anything that wants to join the store's database)."""
        return self._engine

    @property
    def retry_policy(self) -> RetryPolicy:
        """How operations retry transient database errors (see ``helix_dbos.store.retry``)."""
        return self._retry

    @property
    def url(self) -> str:
        """The database URL with the password masked."""
        return self._engine.url.render_as_string(hide_password=True)

    @property
    def workers(self) -> SqlWorkerRegistry:
        """Worker heartbeats (see ``helix_dbos.store.workers``)."""
        return SqlWorkerRegistry(self._engine, retry=self._retry)

    @property
    def pending(self) -> SqlPendingCallStore:
        """Pending client-executed and approval-gated tool calls (see ``helix_dbos.store.hitl``)."""
        return self._pending

    def close(self) -> None:
        """Release connections (the engine is disposed only when the store created it)."""
        if self._owns_engine:
            self._engine.dispose()

    def __enter__(self) -> SqlSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # lifecycle --------------------------------------------------------------------------------

    @retrying
    def create_session(
        self,
        session_id: str,
        *,
        agent_type: str,
        custom_state: dict[str, Any],
        now_ms: int,
        parent_session_id: str | None = None,
        root_session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> SessionRecord:
        """Create a session in status ``active`` with no run yet (turn 0), belonging to ``tenant``.

        Exactly one of any number of concurrent creators wins; the others get
        :class:`SessionAlreadyExistsError`. A session created here can start its first run with
        :meth:`start_run` whatever the request's ``allowed_statuses``.
        """
        values = new_session_values(
            session_id,
            agent_type=agent_type,
            custom_state=custom_state,
            now_ms=now_ms,
            parent_session_id=parent_session_id,
            root_session_id=root_session_id,
            metadata=metadata,
            tenant=check_tenant(tenant),
        )
        stmt = self._dialect.insert_ignore(sessions, ["session_id"]).values(values).returning(*sessions.c)
        with begin_write(self._engine) as conn:
            row = conn.execute(stmt).first()
        if row is None:
            raise SessionAlreadyExistsError(session_id)
        return session_record(row)

    @retrying
    def session_exists(self, session_id: str) -> bool:
        """Return whether the session exists."""
        with begin_read(self._engine) as conn:
            stmt = sa.select(sa.literal(1)).where(sessions.c.session_id == session_id)
            return conn.execute(stmt).first() is not None

    @retrying
    def delete_session(self, session_id: str) -> None:
        """Delete the session, its transcript, runs, checkpoints, child refs and usage.

        Child *sessions* are separate sessions and are not deleted.
        """
        with begin_write(self._engine) as conn:
            for table in (messages, runs, checkpoints, sub_session_refs, usage, sessions):
                conn.execute(sa.delete(table).where(table.c.session_id == session_id))

    @retrying
    def load_session(self, session_id: str) -> SessionRecord | None:
        """Return the session row, or ``None``."""
        with begin_read(self._engine) as conn:
            row = conn.execute(_SESSION_ROW, {"sid": session_id}).first()
        return None if row is None else session_record(row)

    @retrying
    def load_state(self, session_id: str) -> AgentState | None:
        """Return the session as an :class:`AgentState` with its full transcript, or ``None``.

        ``run_id`` is ``""`` for a session that never started a run (``AgentState`` requires one).
        """
        with begin_read(self._engine) as conn:
            row = conn.execute(_SESSION_ROW, {"sid": session_id}).first()
            if row is None:
                return None
            session = session_record(row)
            # Bounded by the count read above: on PostgreSQL a step committed between the two
            # statements must not leak half its messages into this state.
            transcript = read_prefix(conn, session_id, session.message_count)
            refs = read_refs(conn, session_id)
        return AgentState(
            session_id=session.session_id,
            run_id=session.run_id or "",
            agent_type=session.agent_type,
            stream_id=session.stream_id,
            status=session_status_to_agent_status(session.status),
            step_count=session.step_count,
            custom_state=session.custom_state,
            messages=transcript,
            output=session.output,
            error=session.error,
            parent_session_id=session.parent_session_id,
            sub_session_refs=refs,
            aborted=session.aborted,
            abort_reason=session.abort_reason,
        )

    @retrying
    def list_sessions(
        self,
        *,
        status: SessionStatus | None = None,
        limit: int = 50,
        offset: int = 0,
        agent_type: str | None = None,
        tenant: str | None = None,
    ) -> list[SessionRecord]:
        """Return sessions, most recently updated first (one agent's or tenant's only, when given)."""
        stmt = sa.select(sessions)
        if status is not None:
            stmt = stmt.where(sessions.c.status == status)
        if tenant is not None:
            stmt = stmt.where(sessions.c.tenant == tenant)
        if agent_type is not None:
            stmt = stmt.where(sessions.c.agent_type == agent_type)
        stmt = (
            stmt.order_by(sessions.c.updated_at.desc(), sessions.c.session_id)
            .limit(max(limit, 0))
            .offset(max(offset, 0))
        )
        with begin_read(self._engine) as conn:
            return [session_record(row) for row in conn.execute(stmt)]

    @retrying
    def tenant_spend(self, tenant: str, *, since_ms: int | None = None) -> TenantSpend:
        """What the tenant's sessions recorded as usage (at or after ``since_ms``; all of it when ``None``)."""
        return tenant_ops.tenant_spend(self._engine, tenant, since_ms)

    # messages ---------------------------------------------------------------------------------

    @retrying
    def get_messages(
        self, session_id: str, *, offset: int = 0, limit: int = 50, include_thinking: bool = True
    ) -> PaginatedMessages:
        """Return a page of the transcript in sequence order (empty for an unknown session).

        Sequences are contiguous from 0, so a page is a primary-key range scan, not an OFFSET.
        """
        offset = max(offset, 0)
        limit = max(limit, 0)
        with begin_read(self._engine) as conn:
            total = conn.execute(
                sa.select(sessions.c.message_count).where(sessions.c.session_id == session_id)
            ).scalar_one_or_none()
            page: list[Message] = []
            if total is not None and limit > 0 and offset < total:
                rows = conn.execute(
                    sa.select(messages.c.message)
                    .where(
                        messages.c.session_id == session_id,
                        messages.c.sequence >= offset,
                        messages.c.sequence < min(offset + limit, total),
                    )
                    .order_by(messages.c.sequence)
                )
                page = [load_message(data) for (data,) in rows]
        total = total or 0
        if not include_thinking:
            page = strip_thinking(page)
        return PaginatedMessages(
            messages=page, total=total, offset=offset, limit=limit, has_more=offset + len(page) < total
        )

    @retrying
    def get_message_prefix(self, session_id: str, count: int) -> list[Message]:
        """Return the first ``count`` messages (what a run saw when it started)."""
        with begin_read(self._engine) as conn:
            return read_prefix(conn, session_id, count)

    @retrying
    def get_message_count(self, session_id: str) -> int:
        """Return the number of messages in the transcript (0 for an unknown session)."""
        with begin_read(self._engine) as conn:
            count = conn.execute(
                sa.select(sessions.c.message_count).where(sessions.c.session_id == session_id)
            ).scalar_one_or_none()
        return count or 0

    @retrying
    def truncate_messages(self, session_id: str, message_count: int) -> None:
        """Drop messages with sequence >= ``message_count`` (a no-op when there are fewer)."""
        with begin_write(self._engine) as conn:
            row = self._dialect.lock_session(conn, session_id)
            if row is None:
                raise SessionNotFoundError(session_id)
            if message_count >= row.message_count:
                return
            message_count = max(message_count, 0)
            conn.execute(
                sa.delete(messages).where(messages.c.session_id == session_id, messages.c.sequence >= message_count)
            )
            conn.execute(
                sa.update(sessions)
                .where(sessions.c.session_id == session_id)
                .values(message_count=message_count, version=sessions.c.version + 1, updated_at=clock_ms())
            )

    # status and interrupts (``helix_dbos.store.status``) ----------------------------------------

    @retrying
    def compare_and_set_status(
        self,
        session_id: str,
        expected_statuses: list[SessionStatus],
        new_status: SessionStatus,
        *,
        expected_version: int | None = None,
        error: str | None = None,
        interrupt_context: InterruptContext | None = None,
    ) -> CasResult:
        """Set the status only if it is one of ``expected_statuses`` (and at ``expected_version``)."""
        return status_ops.compare_and_set_status(
            self._engine,
            session_id,
            expected_statuses,
            new_status,
            expected_version=expected_version,
            error=error,
            interrupt_context=interrupt_context,
        )

    @retrying
    def request_interrupt(self, session_id: str, reason: str | None, *, now_ms: int) -> bool:
        """Durably flag an interrupt for an active session; False when it is not active (or absent)."""
        return status_ops.request_interrupt(self._engine, self._dialect, session_id, reason, now_ms=now_ms)

    @retrying
    def clear_interrupt(self, session_id: str) -> None:
        """Clear a pending interrupt flag (the context stays as the record of the last request)."""
        status_ops.clear_interrupt(self._engine, session_id)

    @retrying
    def increment_resume_count(self, session_id: str) -> int:
        """Add one to the session's resume counter and return the new value."""
        return status_ops.increment_resume_count(self._engine, session_id)

    # runs, step commits, checkpoints (their own modules) ------------------------------------------

    @retrying
    def start_run(self, request: StartRun) -> StartRunResult:
        """Open a run in one transaction (rules: :func:`helix_dbos.store.runs.start_run`)."""
        return run_ops.start_run(self._engine, self._dialect, request)

    @retrying
    def start_run_with(
        self,
        request: StartRun,
        stream_sequence: Callable[[Connection], int],
        also: Callable[[Connection], object],
        riding: RidingStart | None = None,
    ) -> StartRunResult:
        """:meth:`start_run`, with a stream's start folded into the same transaction.

        ``stream_sequence(conn)`` supplies the run's ``stream_start_sequence`` (read under the
        session's lock) and ``also(conn)`` runs after the writes of a run actually started. For
        writers on this store's :attr:`engine`: the runtime activates the durable stream this way.
        Both run again if the transaction is retried. ``riding``: the same as SQL, for a new
        session's one-statement start (:meth:`start_new_session`), tried first on PostgreSQL.
        """
        return run_ops.start_run(
            self._engine, self._dialect, request, stream_sequence=stream_sequence, also=also, riding=riding
        )

    @retrying
    def start_new_session(self, request: StartRun, riding: RidingStart | None = None) -> StartRunResult | None:
        """A new session's first run in one statement, or ``None`` having written nothing (it exists; SQLite).

        Rules: :func:`helix_dbos.store.runs.start_new_session_alone`.
        """
        return run_ops.start_new_session_alone(self._engine, self._dialect, request, riding)

    @retrying
    def commit_step(self, commit: StepCommit) -> CommitResult:
        """Commit one loop iteration atomically and idempotently (``helix_dbos.store.commit``)."""
        return commit_step(self._engine, self._dialect, commit)

    @retrying
    def commit_step_with(self, commit: StepCommit, also: Callable[[Connection], object] | RidingWrite) -> CommitResult:
        """:meth:`commit_step`, with ``also``'s writes in the same transaction.

        For writers on this store's :attr:`engine` that want their rows committed (or rolled back)
        with the step, at no transaction of their own: the runtime stores a run's queued stream
        chunks this way. ``also(conn)`` runs after the commit's writes; a :class:`RidingWrite` goes
        in the commit's own statement where the backend can (PostgreSQL). Either runs again if the
        transaction is retried.
        """
        return commit_step(self._engine, self._dialect, commit, also=also)

    @retrying
    def finish_run(
        self,
        session_id: str,
        run_id: str,
        *,
        session_status: SessionStatus,
        run_status: RunStatus,
        output: Any = None,
        error: str | None = None,
        aborted: bool = False,
        abort_reason: str | None = None,
        interrupt_context: InterruptContext | None = None,
        now_ms: int,
    ) -> None:
        """End a run without a step commit (see :func:`helix_dbos.store.runs.finish_run`)."""
        run_ops.finish_run(
            self._engine,
            session_id,
            run_id,
            session_status=session_status,
            run_status=run_status,
            output=output,
            error=error,
            aborted=aborted,
            abort_reason=abort_reason,
            interrupt_context=interrupt_context,
            now_ms=now_ms,
        )

    @retrying
    def get_run(self, run_id: str) -> RunRecord | None:
        """Return one run record, or ``None``."""
        return run_ops.get_run(self._engine, run_id)

    @retrying
    def get_current_run(self, session_id: str) -> RunRecord | None:
        """Return the run with the highest turn, or ``None`` before the first run."""
        return run_ops.get_current_run(self._engine, session_id)

    @retrying
    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Return all runs of the session by turn (1, 2, 3 ...)."""
        return run_ops.list_runs(self._engine, session_id)

    @retrying
    def list_running_runs(self, *, after_run_id: str | None = None, limit: int = 500) -> list[RunRecord]:
        """Runs with status ``running`` by run id, after ``after_run_id`` (see ``helix_dbos.store.runs``)."""
        return run_ops.list_running_runs(self._engine, after_run_id=after_run_id, limit=limit)

    @retrying
    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """Return a checkpoint with its state (``state.messages``: the first ``message_count``)."""
        return checkpoint_reads.get_checkpoint(self._engine, checkpoint_id)

    @retrying
    def get_latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        """Return the newest checkpoint of the session (by time, then step)."""
        return checkpoint_reads.get_latest_checkpoint(self._engine, session_id)

    @retrying
    def list_checkpoints(self, session_id: str, *, offset: int = 0, limit: int = 50) -> PaginatedCheckpoints:
        """Return checkpoint summaries, newest first (by time, then step)."""
        return checkpoint_reads.list_checkpoints(self._engine, session_id, offset=offset, limit=limit)

    @retrying
    def fork_session(self, request: ForkSession) -> ForkResult:
        """Branch a new session from a checkpoint of another (``helix_dbos.store.fork``)."""
        return fork_ops.fork_session(self._engine, self._dialect, request)

    # sub-sessions and usage -------------------------------------------------------------------

    @retrying
    def add_sub_session_refs(self, session_id: str, refs: list[SubSessionRef]) -> None:
        """Record child sessions; a ref that already exists is left as it is (re-executed steps)."""
        if not refs:
            return
        with begin_write(self._engine) as conn:
            conn.execute(
                self._dialect.insert_ignore(sub_session_refs, ["session_id", "sub_session_id"]),
                [{**ref.model_dump(), "session_id": session_id} for ref in refs],
            )

    @retrying
    def update_sub_session_ref(
        self, session_id: str, sub_session_id: str, *, status: str, completed_at: int | None = None
    ) -> None:
        """Update a child session's status (and completion time)."""
        with begin_write(self._engine) as conn:
            conn.execute(
                sa.update(sub_session_refs)
                .where(
                    sub_session_refs.c.session_id == session_id,
                    sub_session_refs.c.sub_session_id == sub_session_id,
                )
                .values(status=status, completed_at=completed_at)
            )

    @retrying
    def update_remote_progress(
        self, session_id: str, sub_session_id: str, *, run_id: str | None = None, last_sequence: int | None = None
    ) -> None:
        """Record a remote child's run id and proxied sequence; a sequence never moves back (stale writers)."""
        where = (sub_session_refs.c.session_id == session_id, sub_session_refs.c.sub_session_id == sub_session_id)
        with begin_write(self._engine) as conn:
            found = conn.execute(sa.select(sub_session_refs.c.remote).where(*where).with_for_update()).first()
            if found is None or found.remote is None:
                return
            remote = dict(found.remote)
            if run_id is not None:
                remote["run_id"] = run_id
            if last_sequence is not None:
                remote["last_sequence"] = max(int(remote.get("last_sequence") or 0), last_sequence)
            conn.execute(sa.update(sub_session_refs).where(*where).values(remote=remote))

    @retrying
    def get_sub_session_refs(self, session_id: str) -> list[SubSessionRef]:
        """Return the session's child references, oldest first."""
        with begin_read(self._engine) as conn:
            return read_refs(conn, session_id)

    @retrying
    def get_usage_unless_delegated(self, session_id: str, *, run_id: str | None = None) -> list[UsageRow] | None:
        """:meth:`get_usage` in one statement; ``None`` when the session has child references."""
        with begin_read(self._engine) as conn:
            return read_usage_unless_delegated(conn, session_id, run_id)

    @retrying
    def get_usage(
        self, session_id: str, *, run_id: str | None = None, include_children: bool = False
    ) -> list[UsageRow]:
        """Return the usage records of the session (or of one run), in commit order.

        ``include_children`` adds the records of every session below it (sub-agents, found through
        ``parent_session_id``, level by level), so a rollup covers the work the session delegated.
        """
        with begin_read(self._engine) as conn:
            session_ids = [session_id]
            if include_children:
                level = [session_id]
                while level:
                    level = list(
                        conn.execute(
                            sa.select(sessions.c.session_id).where(sessions.c.parent_session_id.in_(level))
                        ).scalars()
                    )
                    level = [s for s in level if s not in session_ids]  # a cycle would be a bug; never loop
                    session_ids.extend(level)
            stmt = sa.select(usage).where(usage.c.session_id.in_(session_ids))
            if run_id is not None:
                stmt = stmt.where(usage.c.run_id == run_id)
            stmt = stmt.order_by(usage.c.created_at, usage.c.run_id, usage.c.step, usage.c.ordinal)
            return [usage_record(row) for row in conn.execute(stmt)]


if TYPE_CHECKING:
    _protocol_check: type[SessionStore] = SqlSessionStore
