"""The SQL session store: one implementation for PostgreSQL (psycopg 3) and SQLite.

Each :class:`SessionStore` operation is one short transaction. Concurrency is decided by the
database, never by a read-then-write in Python:

- ``create_session`` is ``INSERT .. ON CONFLICT DO NOTHING``: the row either appears or it did not.
- ``start_run`` locks the session row (``SELECT .. FOR UPDATE`` on PostgreSQL; on SQLite every
  write transaction is ``BEGIN IMMEDIATE``, so writers are serialized from their first statement)
  and still guards its update with the version it read. ``UNIQUE(session_id, turn)`` on runs is
  the last line of defence: two runs can never share a turn.
- ``commit_step`` inserts its checkpoint first, with ``ON CONFLICT (session_id, run_id,
  step_count) DO NOTHING``; losing that insert means the step was already committed, and the
  commit returns the first checkpoint's id without writing anything. The session update is
  guarded by the run id and the message count, so a superseded run or a sequence gap rolls the
  whole commit back.

SQLite notes: WAL mode and a busy timeout are set on every connection, and pysqlite's own
transaction handling is switched off so that the store can emit ``BEGIN`` / ``BEGIN IMMEDIATE``
itself (the SQLAlchemy-documented recipe). Use a file URL; ``:memory:`` databases are per
connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import postgresql, sqlite

from helix_dbos.checkpoint import Checkpoint, CheckpointMeta, generate_checkpoint_id
from helix_dbos.errors import (
    AgentAlreadyRunningError,
    AgentMismatchError,
    AgentNotResumableError,
    ExecutorSupersededError,
    HelixError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    StaleStateError,
)
from helix_dbos.messages import Message, MessageAdapter, strip_thinking
from helix_dbos.session import (
    AgentState,
    InterruptContext,
    RunStatus,
    SessionStatus,
    SubSessionRef,
    session_status_to_agent_status,
)
from helix_dbos.store import codec
from helix_dbos.store.base import (
    CasResult,
    CommitResult,
    PaginatedCheckpoints,
    PaginatedMessages,
    RunRecord,
    SessionRecord,
    StartRun,
    StartRunResult,
    StepCommit,
    UsageRecord,
)
from helix_dbos.store.engine import begin_read as _begin_read
from helix_dbos.store.engine import begin_write as _begin_write
from helix_dbos.store.engine import create_engine_for
from helix_dbos.store.engine import now_ms as _now_ms
from helix_dbos.store.hitl import PendingToolCallStore
from helix_dbos.store.migrate import check_migrated
from helix_dbos.store.retry import RetryPolicy, retrying
from helix_dbos.store.schema import checkpoints, messages, runs, sessions, sub_session_refs, usage
from helix_dbos.store.workers import WorkerRegistry

if TYPE_CHECKING:
    from helix_dbos.store.base import SessionStore

_TERMINAL_RUN_STATUSES: Final = frozenset({"completed", "failed", "interrupted"})


_PG_COMMIT_STEP = sa.text(
    """
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
                             cached_input_tokens, reasoning_tokens, value, success, created_at)
    SELECT :sid, :rid, x.step, x.kind, x.name, x.ordinal, x.input_tokens, x.output_tokens,
           x.cached_input_tokens, x.reasoning_tokens, x.value, x.success, :now
    FROM json_to_recordset(CAST(:usage AS json)) AS x(
        step int, kind text, name text, ordinal int, input_tokens bigint, output_tokens bigint,
        cached_input_tokens bigint, reasoning_tokens bigint, value float8, success boolean)
    WHERE EXISTS (SELECT 1 FROM s)
    ON CONFLICT DO NOTHING
)
SELECT (SELECT checkpoint_id FROM cp) AS checkpoint_id, s.interrupt_requested, s.interrupt_context
FROM (SELECT 1) AS one LEFT JOIN s ON true
"""
)
"""The PostgreSQL form of ``commit_step`` (see ``SqlSessionStore._commit_step_postgres``)."""


# row conversion ---------------------------------------------------------------------------------


def _dump_message(message: Message) -> dict[str, Any]:
    # Python mode: JSON mode would turn a lone surrogate in a dict key (a tool call's argument name)
    # into U+FFFD silently; the JSON serialiser (the codec) stores it faithfully instead.
    return message.model_dump(mode="python", exclude_none=True)


def _load_message(data: Any) -> Message:
    return MessageAdapter.validate_python(data)


def _session_record(row: sa.Row[Any]) -> SessionRecord:
    return SessionRecord.model_validate(dict(row._mapping))


def _run_record(row: sa.Row[Any]) -> RunRecord:
    return RunRecord.model_validate(dict(row._mapping))


def _sub_session_ref(row: sa.Row[Any]) -> SubSessionRef:
    data = dict(row._mapping)
    del data["session_id"]
    return SubSessionRef.model_validate(data)


def _usage_record(row: sa.Row[Any]) -> UsageRecord:
    data = dict(row._mapping)
    for key in ("session_id", "run_id", "ordinal", "created_at"):
        del data[key]
    return UsageRecord.model_validate(data)


def _interrupt_reason(context: Any) -> str | None:
    if isinstance(context, dict):
        reason = context.get("reason")
        return reason if isinstance(reason, str) else None
    return None


def _context_json(context: InterruptContext | None) -> dict[str, Any] | None:
    return None if context is None else context.model_dump(mode="json")


# the store --------------------------------------------------------------------------------------


class SqlSessionStore:
    """:class:`~helix_dbos.store.base.SessionStore` on PostgreSQL or SQLite.

    ``database_url`` is a URL (``postgresql://...``, ``postgresql+psycopg://...``,
    ``sqlite:///path``) or an engine you own; an engine passed in is not disposed by
    :meth:`close`. (Build SQLite engines with :func:`create_engine_for`: the store relies on the
    ``BEGIN IMMEDIATE`` hook it installs.) The constructor checks that the schema is at the
    revision this package expects and raises :class:`~helix_dbos.errors.DatabaseNotMigratedError`
    otherwise; ``check_schema=False`` skips that query for callers that just checked.
    """

    def __init__(
        self, database_url: str | Engine, *, check_schema: bool = True, retry: RetryPolicy | None = None
    ) -> None:
        self._retry = retry if retry is not None else RetryPolicy.from_env()
        if isinstance(database_url, Engine):
            self._engine = database_url
            self._owns_engine = False
        else:
            self._engine = create_engine_for(database_url)
            self._owns_engine = True
        backend = self._engine.dialect.name
        if backend not in ("postgresql", "sqlite"):
            self.close()
            raise HelixError(
                f"SqlSessionStore supports PostgreSQL and SQLite, not {backend!r}",
                code="framework_not_supported",
            )
        self._postgres = backend == "postgresql"
        self._pending = PendingToolCallStore(self._engine, retry=self._retry)
        if check_schema:
            try:
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
    def workers(self) -> WorkerRegistry:
        """Worker heartbeats (see ``helix_dbos.store.workers``)."""
        return WorkerRegistry(self._engine, retry=self._retry)

    @property
    def pending(self) -> PendingToolCallStore:
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

    # helpers ----------------------------------------------------------------------------------

    def _insert_ignore(self, table: sa.Table, conflict: Sequence[str]) -> sa.Insert:
        """``INSERT .. ON CONFLICT (conflict) DO NOTHING`` in the backend's dialect."""
        if self._postgres:
            return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(conflict))

    @staticmethod
    def _lock_session(conn: Connection, session_id: str) -> sa.Row[Any] | None:
        stmt = sa.select(sessions).where(sessions.c.session_id == session_id).with_for_update()
        return conn.execute(stmt).first()

    @staticmethod
    def _insert_messages(
        conn: Connection,
        session_id: str,
        run_id: str | None,
        step: int,
        first_sequence: int,
        new_messages: Sequence[Message],
        now_ms: int,
    ) -> None:
        if not new_messages:
            return
        conn.execute(
            messages.insert(),
            [
                {
                    "session_id": session_id,
                    "sequence": first_sequence + i,
                    "run_id": run_id,
                    "step": step,
                    "role": message.role,
                    "message": _dump_message(message),
                    "created_at": now_ms,
                }
                for i, message in enumerate(new_messages)
            ],
        )

    @staticmethod
    def _read_prefix(conn: Connection, session_id: str, count: int) -> list[Message]:
        if count <= 0:
            return []
        rows = conn.execute(
            sa.select(messages.c.message)
            .where(messages.c.session_id == session_id, messages.c.sequence < count)
            .order_by(messages.c.sequence)
        )
        return [_load_message(data) for (data,) in rows]

    @staticmethod
    def _read_refs(conn: Connection, session_id: str) -> list[SubSessionRef]:
        rows = conn.execute(
            sa.select(sub_session_refs)
            .where(sub_session_refs.c.session_id == session_id)
            .order_by(sub_session_refs.c.started_at, sub_session_refs.c.sub_session_id)
        )
        return [_sub_session_ref(row) for row in rows]

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
    ) -> SessionRecord:
        """Create a session in status ``active`` with no run yet (turn 0).

        Exactly one of any number of concurrent creators wins; the others get
        :class:`SessionAlreadyExistsError`. A session created here can start its first run with
        :meth:`start_run` whatever the request's ``allowed_statuses``.
        """
        values = _new_session_values(
            session_id,
            agent_type=agent_type,
            custom_state=custom_state,
            now_ms=now_ms,
            parent_session_id=parent_session_id,
            root_session_id=root_session_id,
            metadata=metadata,
        )
        stmt = self._insert_ignore(sessions, ["session_id"]).values(values).returning(*sessions.c)
        with _begin_write(self._engine) as conn:
            row = conn.execute(stmt).first()
        if row is None:
            raise SessionAlreadyExistsError(session_id)
        return _session_record(row)

    @retrying
    def session_exists(self, session_id: str) -> bool:
        """Return whether the session exists."""
        with _begin_read(self._engine) as conn:
            stmt = sa.select(sa.literal(1)).where(sessions.c.session_id == session_id)
            return conn.execute(stmt).first() is not None

    @retrying
    def delete_session(self, session_id: str) -> None:
        """Delete the session, its transcript, runs, checkpoints, child refs and usage.

        Child *sessions* are separate sessions and are not deleted.
        """
        with _begin_write(self._engine) as conn:
            for table in (messages, runs, checkpoints, sub_session_refs, usage, sessions):
                conn.execute(sa.delete(table).where(table.c.session_id == session_id))

    @retrying
    def load_session(self, session_id: str) -> SessionRecord | None:
        """Return the session row, or ``None``."""
        with _begin_read(self._engine) as conn:
            row = conn.execute(sa.select(sessions).where(sessions.c.session_id == session_id)).first()
        return None if row is None else _session_record(row)

    @retrying
    def load_state(self, session_id: str) -> AgentState | None:
        """Return the session as an :class:`AgentState` with its full transcript, or ``None``.

        ``run_id`` is ``""`` for a session that never started a run (``AgentState`` requires one).
        """
        with _begin_read(self._engine) as conn:
            row = conn.execute(sa.select(sessions).where(sessions.c.session_id == session_id)).first()
            if row is None:
                return None
            session = _session_record(row)
            # Bounded by the count read above: on PostgreSQL a step committed between the two
            # statements must not leak half its messages into this state.
            transcript = self._read_prefix(conn, session_id, session.message_count)
            refs = self._read_refs(conn, session_id)
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
        with _begin_read(self._engine) as conn:
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
                page = [_load_message(data) for (data,) in rows]
        total = total or 0
        if not include_thinking:
            page = strip_thinking(page)
        return PaginatedMessages(
            messages=page, total=total, offset=offset, limit=limit, has_more=offset + len(page) < total
        )

    @retrying
    def get_message_prefix(self, session_id: str, count: int) -> list[Message]:
        """Return the first ``count`` messages (what a run saw when it started)."""
        with _begin_read(self._engine) as conn:
            return self._read_prefix(conn, session_id, count)

    @retrying
    def get_message_count(self, session_id: str) -> int:
        """Return the number of messages in the transcript (0 for an unknown session)."""
        with _begin_read(self._engine) as conn:
            count = conn.execute(
                sa.select(sessions.c.message_count).where(sessions.c.session_id == session_id)
            ).scalar_one_or_none()
        return count or 0

    @retrying
    def truncate_messages(self, session_id: str, message_count: int) -> None:
        """Drop messages with sequence >= ``message_count`` (a no-op when there are fewer)."""
        with _begin_write(self._engine) as conn:
            row = self._lock_session(conn, session_id)
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
                .values(message_count=message_count, version=sessions.c.version + 1, updated_at=_now_ms())
            )

    # status -----------------------------------------------------------------------------------

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
        """Set the status only if it is one of ``expected_statuses`` (and at ``expected_version``).

        One guarded ``UPDATE .. RETURNING``; on a miss the current status and version are read
        back so the caller can decide what to do. ``error`` and ``interrupt_context`` are written
        only when given. An unknown session raises :class:`SessionNotFoundError`.
        """
        values: dict[str, Any] = {
            "status": new_status,
            "version": sessions.c.version + 1,
            "updated_at": _now_ms(),
        }
        if error is not None:
            values["error"] = error
        if interrupt_context is not None:
            values["interrupt_context"] = _context_json(interrupt_context)
        stmt = sa.update(sessions).where(sessions.c.session_id == session_id, sessions.c.status.in_(expected_statuses))
        if expected_version is not None:
            stmt = stmt.where(sessions.c.version == expected_version)
        with _begin_write(self._engine) as conn:
            new_version = conn.execute(stmt.values(values).returning(sessions.c.version)).scalar_one_or_none()
            if new_version is not None:
                return CasResult(ok=True, new_version=new_version)
            current = conn.execute(
                sa.select(sessions.c.status, sessions.c.version).where(sessions.c.session_id == session_id)
            ).first()
        if current is None:
            raise SessionNotFoundError(session_id)
        return CasResult(ok=False, current_status=current.status, current_version=current.version)

    @retrying
    def request_interrupt(self, session_id: str, reason: str | None, *, now_ms: int) -> bool:
        """Durably flag an interrupt for an active session; False when it is not active (or absent).

        The running loop sees the flag in the result of its next :meth:`commit_step`.
        """
        with _begin_write(self._engine) as conn:
            row = conn.execute(
                sa.select(sessions.c.status, sessions.c.step_count)
                .where(sessions.c.session_id == session_id)
                .with_for_update()
            ).first()
            if row is None or row.status != "active":
                return False
            context = InterruptContext(reason=reason, step_count=row.step_count, timestamp=now_ms)
            result = conn.execute(
                sa.update(sessions)
                .where(sessions.c.session_id == session_id, sessions.c.status == "active")
                .values(
                    interrupt_requested=True,
                    interrupt_context=_context_json(context),
                    version=sessions.c.version + 1,
                    updated_at=now_ms,
                )
            )
            return result.rowcount > 0

    @retrying
    def clear_interrupt(self, session_id: str) -> None:
        """Clear a pending interrupt flag (the context stays as the record of the last request)."""
        with _begin_write(self._engine) as conn:
            conn.execute(
                sa.update(sessions)
                .where(sessions.c.session_id == session_id, sessions.c.interrupt_requested.is_(True))
                .values(interrupt_requested=False, version=sessions.c.version + 1, updated_at=_now_ms())
            )

    @retrying
    def increment_resume_count(self, session_id: str) -> int:
        """Add one to the session's resume counter and return the new value."""
        with _begin_write(self._engine) as conn:
            count = conn.execute(
                sa.update(sessions)
                .where(sessions.c.session_id == session_id)
                .values(
                    resume_count=sessions.c.resume_count + 1,
                    version=sessions.c.version + 1,
                    updated_at=_now_ms(),
                )
                .returning(sessions.c.resume_count)
            ).scalar_one_or_none()
        if count is None:
            raise SessionNotFoundError(session_id)
        return int(count)

    # runs -------------------------------------------------------------------------------------

    @retrying
    def start_run(self, request: StartRun) -> StartRunResult:
        """Open a run in one transaction: create or reopen the session, append input, record the run.

        Rules, in order, for an existing session:

        1. ``request_key`` equals the current run's key: that run is returned with
           ``existing=True`` and nothing is written (a repeated request, whatever the run's state).
        2. Status ``active`` with a running current run (or ``active`` not allowed):
           :class:`AgentAlreadyRunningError`. A session made by :meth:`create_session` that never
           ran is the exception: its first run may start.
        3. Status not in ``allowed_statuses``: :class:`AgentNotResumableError`.
        4. ``expected_version`` given and different: :class:`StaleStateError`.

        Concurrent callers on one session: exactly one wins; the rest get
        :class:`AgentAlreadyRunningError` (or :class:`StaleStateError`, which may be retried).
        """
        with _begin_write(self._engine) as conn:
            row = self._lock_session(conn, request.session_id)
            if row is None:
                if request.new_session_state is None:
                    raise SessionNotFoundError(request.session_id)
                created = self._create_for_run(conn, request)
                if created is not None:
                    return created
                # Lost the creation race: the winner has committed, so this is now a session that
                # exists (and is most likely running).
                row = self._lock_session(conn, request.session_id)
                if row is None:
                    raise SessionNotFoundError(request.session_id)
            return self._reopen(conn, request, _session_record(row))

    def _create_for_run(self, conn: Connection, request: StartRun) -> StartRunResult | None:
        values = _new_session_values(
            request.session_id,
            agent_type=request.agent_type,
            custom_state=request.new_session_state or {},
            now_ms=request.now_ms,
            parent_session_id=request.parent_session_id,
            root_session_id=request.root_session_id,
            metadata=request.metadata,
        )
        values.update(
            turn=1,
            run_id=request.run_id,
            stream_id=request.stream_id or request.session_id,
            message_count=len(request.input_messages),
            agent_fingerprint=request.agent_fingerprint,
        )
        stmt = self._insert_ignore(sessions, ["session_id"]).values(values).returning(*sessions.c)
        row = conn.execute(stmt).first()
        if row is None:
            return None
        self._insert_messages(conn, request.session_id, request.run_id, 0, 0, request.input_messages, request.now_ms)
        run = self._insert_run(conn, request, turn=1, start_sequence=0)
        return StartRunResult(run=run, session=_session_record(row), created_session=True)

    def _reopen(self, conn: Connection, request: StartRun, session: SessionRecord) -> StartRunResult:
        sid = request.session_id
        if session.agent_type != request.agent_type:  # checked under the row lock: a session is one agent's
            raise AgentMismatchError(sid, session.agent_type, request.agent_type)
        current: RunRecord | None = None
        if session.run_id is not None:
            run_row = conn.execute(sa.select(runs).where(runs.c.run_id == session.run_id)).first()
            current = None if run_row is None else _run_record(run_row)
        if request.request_key is not None and current is not None and current.request_key == request.request_key:
            return StartRunResult(run=current, session=session, created_session=False, existing=True)

        never_ran = session.turn == 0 and session.status == "active"
        if not never_ran:
            if session.status == "active" and (
                (current is not None and current.status == "running") or "active" not in request.allowed_statuses
            ):
                raise AgentAlreadyRunningError(sid, session.status)
            if session.status not in request.allowed_statuses:
                raise AgentNotResumableError(sid, session.status)
        if request.expected_version is not None and request.expected_version != session.version:
            raise StaleStateError(sid, request.expected_version, session.version)

        start_sequence = session.message_count
        if request.truncate_to is not None:
            if not 0 <= request.truncate_to <= session.message_count:
                raise HelixError(
                    f"Cannot truncate session {sid!r} to {request.truncate_to} messages: "
                    f"it has {session.message_count}",
                    code="validation_error",
                )
            start_sequence = request.truncate_to
            conn.execute(sa.delete(messages).where(messages.c.session_id == sid, messages.c.sequence >= start_sequence))
            # Checkpoints that saw the dropped messages would point past the transcript.
            conn.execute(
                sa.delete(checkpoints).where(
                    checkpoints.c.session_id == sid, checkpoints.c.message_count > start_sequence
                )
            )

        values: dict[str, Any] = {
            "status": "active",
            "version": sessions.c.version + 1,
            "turn": sessions.c.turn + 1,
            "run_id": request.run_id,
            "step_count": 0,
            "message_count": start_sequence + len(request.input_messages),
            "output": None,
            "error": None,
            "interrupt_requested": False,
            "interrupt_context": None,
            "aborted": False,
            "abort_reason": None,
            "updated_at": request.now_ms,
        }
        if request.reset_custom_state is not None:
            values["custom_state"] = request.reset_custom_state
        if request.agent_fingerprint is not None:
            values["agent_fingerprint"] = request.agent_fingerprint
        if request.metadata is not None:
            values["metadata"] = request.metadata
        row = conn.execute(
            sa.update(sessions)
            .where(sessions.c.session_id == sid, sessions.c.version == session.version)
            .values(values)
            .returning(*sessions.c)
        ).first()
        if row is None:
            # Unreachable while the row lock / IMMEDIATE transaction holds, kept as the CAS guard.
            now = conn.execute(
                sa.select(sessions.c.status, sessions.c.version).where(sessions.c.session_id == sid)
            ).first()
            if now is None:
                raise SessionNotFoundError(sid)
            if now.status == "active":
                raise AgentAlreadyRunningError(sid, now.status)
            raise StaleStateError(sid, session.version, now.version)
        updated = _session_record(row)
        self._insert_messages(conn, sid, request.run_id, 0, start_sequence, request.input_messages, request.now_ms)
        run = self._insert_run(conn, request, turn=updated.turn, start_sequence=start_sequence)
        return StartRunResult(run=run, session=updated, created_session=False)

    @staticmethod
    def _insert_run(conn: Connection, request: StartRun, *, turn: int, start_sequence: int) -> RunRecord:
        run = RunRecord(
            run_id=request.run_id,
            session_id=request.session_id,
            turn=turn,
            status="running",
            step_count=0,
            started_at=request.now_ms,
            start_sequence=start_sequence,
            stream_start_sequence=request.stream_start_sequence,
            workflow_id=request.workflow_id,
            mode=request.mode,
            previous_run_id=request.previous_run_id,
            agent_fingerprint=request.agent_fingerprint,
            request_key=request.request_key,
        )
        conn.execute(runs.insert().values(run.model_dump()))
        return run

    @retrying
    def commit_step(self, commit: StepCommit) -> CommitResult:
        """Commit one loop iteration atomically and idempotently.

        Statements, in one transaction: insert the checkpoint (the idempotency key); update the
        session guarded by run id and message count, returning the interrupt flag; insert the
        messages and usage (one ``executemany`` each); update the run.

        Raises :class:`ExecutorSupersededError` when the session has moved on to another run,
        :class:`SessionNotFoundError`, or a ``HelixError`` on a sequence gap (a runtime bug);
        all of them roll the commit back.
        """
        if self._engine.dialect.name == "postgresql":
            return self._commit_step_postgres(commit)
        sid = commit.session_id
        now = commit.now_ms
        message_count = commit.first_sequence + len(commit.messages)
        checkpoint_id = generate_checkpoint_id(sid, commit.step_count, timestamp_ms=now)
        with _begin_write(self._engine) as conn:
            inserted = conn.execute(
                self._insert_ignore(checkpoints, ["session_id", "run_id", "step_count"])
                .values(
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
                .returning(checkpoints.c.checkpoint_id)
            ).scalar_one_or_none()
            if inserted is None:
                return self._already_committed(conn, commit)

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
            flags = conn.execute(
                sa.update(sessions)
                .where(
                    sessions.c.session_id == sid,
                    sessions.c.run_id == commit.run_id,
                    sessions.c.message_count == commit.first_sequence,
                )
                .values(values)
                .returning(sessions.c.interrupt_requested, sessions.c.interrupt_context)
            ).first()
            if flags is None:
                raise self._commit_conflict(conn, commit)
            self._insert_messages(
                conn, sid, commit.run_id, commit.step_count, commit.first_sequence, commit.messages, now
            )
            run_values: dict[str, Any] = {"step_count": commit.step_count}
            if commit.run_status is not None:
                run_values.update(
                    status=commit.run_status,
                    error=commit.error,
                    completed_at=now if commit.run_status in _TERMINAL_RUN_STATUSES else None,
                )
            conn.execute(sa.update(runs).where(runs.c.run_id == commit.run_id).values(run_values))
            if commit.usage:
                conn.execute(
                    self._insert_ignore(usage, ["session_id", "run_id", "step", "kind", "name", "ordinal"]),
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
        return CommitResult(
            checkpoint_id=checkpoint_id,
            applied=True,
            interrupt_requested=bool(flags.interrupt_requested),
            interrupt_reason=_interrupt_reason(flags.interrupt_context) if flags.interrupt_requested else None,
        )

    def _commit_step_postgres(self, commit: StepCommit) -> CommitResult:
        """:meth:`commit_step` as one statement: a single round trip on the agent loop's hot path.

        Same effects and guards as the portable path. The session update goes first and is the
        gate: it applies only if this step is not committed yet and the transcript is exactly where
        the commit starts; everything else hangs off its ``RETURNING`` row. A concurrent duplicate
        blocks on the session row lock and then fails the gate. When nothing applied, a short read
        tells "already committed" (a no-op) from a conflict.
        """
        sid = commit.session_id
        now = commit.now_ms
        final = commit.session_status is not None
        params = {
            "sid": sid,
            "rid": commit.run_id,
            "step": commit.step_count,
            "first": commit.first_sequence,
            "message_count": commit.first_sequence + len(commit.messages),
            "now": now,
            "custom_state": codec.dumps(commit.custom_state),
            "final": final,
            "status": commit.session_status,
            "output": codec.dumps(commit.output),
            "error": None if commit.error is None else codec.escape_text(commit.error),
            "run_status": commit.run_status,
            "run_terminal": commit.run_status in _TERMINAL_RUN_STATUSES,
            "checkpoint_id": generate_checkpoint_id(sid, commit.step_count, timestamp_ms=now),
            "checkpoint_status": commit.checkpoint_status,
            "stream_sequence": commit.stream_sequence,
            "messages": codec.dumps([_dump_message(m) for m in commit.messages]),
            "usage": codec.dumps([{**record.model_dump(), "ordinal": i} for i, record in enumerate(commit.usage)]),
        }
        with _begin_write(self._engine) as conn:
            row = conn.execute(_PG_COMMIT_STEP, params).one()
            if row.checkpoint_id is not None:
                requested = bool(row.interrupt_requested)
                return CommitResult(
                    checkpoint_id=row.checkpoint_id,
                    applied=True,
                    interrupt_requested=requested,
                    interrupt_reason=_interrupt_reason(row.interrupt_context) if requested else None,
                )
            exists = conn.execute(
                sa.select(checkpoints.c.checkpoint_id).where(
                    checkpoints.c.session_id == sid,
                    checkpoints.c.run_id == commit.run_id,
                    checkpoints.c.step_count == commit.step_count,
                )
            ).first()
            if exists is None:
                raise self._commit_conflict(conn, commit)
            return self._already_committed(conn, commit)

    @staticmethod
    def _already_committed(conn: Connection, commit: StepCommit) -> CommitResult:
        row = conn.execute(
            sa.select(checkpoints.c.checkpoint_id, sessions.c.interrupt_requested, sessions.c.interrupt_context)
            .select_from(checkpoints)
            .join(sessions, sessions.c.session_id == checkpoints.c.session_id, isouter=True)
            .where(
                checkpoints.c.session_id == commit.session_id,
                checkpoints.c.run_id == commit.run_id,
                checkpoints.c.step_count == commit.step_count,
            )
        ).one()
        requested = bool(row.interrupt_requested)
        return CommitResult(
            checkpoint_id=row.checkpoint_id,
            applied=False,
            interrupt_requested=requested,
            interrupt_reason=_interrupt_reason(row.interrupt_context) if requested else None,
        )

    @staticmethod
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
        """End a run without a step commit (interrupt before any step, abort, orphan cleanup).

        The session is updated only while ``run_id`` is still its current run, so cleaning up an
        old run cannot clobber a newer one; the run record is updated either way.
        """
        with _begin_write(self._engine) as conn:
            updated = conn.execute(
                sa.update(sessions)
                .where(sessions.c.session_id == session_id, sessions.c.run_id == run_id)
                .values(
                    status=session_status,
                    output=output,
                    error=error,
                    aborted=aborted,
                    abort_reason=abort_reason,
                    interrupt_context=_context_json(interrupt_context),
                    interrupt_requested=False,
                    version=sessions.c.version + 1,
                    updated_at=now_ms,
                )
            )
            if updated.rowcount == 0:
                exists = conn.execute(sa.select(sa.literal(1)).where(sessions.c.session_id == session_id)).first()
                if exists is None:
                    raise SessionNotFoundError(session_id)
            conn.execute(
                sa.update(runs)
                .where(runs.c.run_id == run_id)
                .values(
                    status=run_status,
                    error=error,
                    completed_at=now_ms if run_status in _TERMINAL_RUN_STATUSES else None,
                )
            )

    @retrying
    def get_run(self, run_id: str) -> RunRecord | None:
        """Return one run record, or ``None``."""
        with _begin_read(self._engine) as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).first()
        return None if row is None else _run_record(row)

    @retrying
    def get_current_run(self, session_id: str) -> RunRecord | None:
        """Return the run with the highest turn, or ``None`` before the first run."""
        with _begin_read(self._engine) as conn:
            row = conn.execute(
                sa.select(runs).where(runs.c.session_id == session_id).order_by(runs.c.turn.desc()).limit(1)
            ).first()
        return None if row is None else _run_record(row)

    @retrying
    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Return all runs of the session by turn (1, 2, 3 ...)."""
        with _begin_read(self._engine) as conn:
            rows = conn.execute(sa.select(runs).where(runs.c.session_id == session_id).order_by(runs.c.turn))
            return [_run_record(row) for row in rows]

    @retrying
    def list_sessions(
        self, *, status: SessionStatus | None = None, limit: int = 50, offset: int = 0
    ) -> list[SessionRecord]:
        """Return sessions, most recently updated first."""
        stmt = sa.select(sessions)
        if status is not None:
            stmt = stmt.where(sessions.c.status == status)
        stmt = (
            stmt.order_by(sessions.c.updated_at.desc(), sessions.c.session_id)
            .limit(max(limit, 0))
            .offset(max(offset, 0))
        )
        with _begin_read(self._engine) as conn:
            return [_session_record(row) for row in conn.execute(stmt)]

    def list_running_runs(self, *, after_run_id: str | None = None, limit: int = 500) -> list[RunRecord]:
        """Runs with status ``running`` by run id, after ``after_run_id`` (see ``store/orphans.py``)."""
        from helix_dbos.store.orphans import list_running_runs

        return list_running_runs(self._engine, after_run_id=after_run_id, limit=limit)

    # checkpoints ------------------------------------------------------------------------------

    _CHECKPOINT_ORDER = (
        checkpoints.c.created_at.desc(),
        checkpoints.c.step_count.desc(),
        checkpoints.c.checkpoint_id.desc(),
    )

    def _build_checkpoint(self, conn: Connection, row: sa.Row[Any]) -> Checkpoint:
        state = AgentState(
            session_id=row.session_id,
            run_id=row.run_id,
            agent_type=row.agent_type,
            stream_id=row.stream_id,
            status=row.status,
            step_count=row.step_count,
            custom_state=row.custom_state,
            messages=self._read_prefix(conn, row.session_id, row.message_count),
            output=row.output,
            error=row.error,
            parent_session_id=row.parent_session_id,
            sub_session_refs=self._read_refs(conn, row.session_id),
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

    @staticmethod
    def _checkpoint_query() -> sa.Select[Any]:
        return sa.select(
            checkpoints,
            sessions.c.agent_type,
            sessions.c.stream_id,
            sessions.c.parent_session_id,
        ).join(sessions, sessions.c.session_id == checkpoints.c.session_id)

    @retrying
    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """Return a checkpoint with its state (``state.messages``: the first ``message_count``)."""
        with _begin_read(self._engine) as conn:
            row = conn.execute(self._checkpoint_query().where(checkpoints.c.checkpoint_id == checkpoint_id)).first()
            return None if row is None else self._build_checkpoint(conn, row)

    @retrying
    def get_latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        """Return the newest checkpoint of the session (by time, then step)."""
        with _begin_read(self._engine) as conn:
            row = conn.execute(
                self._checkpoint_query()
                .where(checkpoints.c.session_id == session_id)
                .order_by(*self._CHECKPOINT_ORDER)
                .limit(1)
            ).first()
            return None if row is None else self._build_checkpoint(conn, row)

    @retrying
    def list_checkpoints(self, session_id: str, *, offset: int = 0, limit: int = 50) -> PaginatedCheckpoints:
        """Return checkpoint summaries, newest first (by time, then step)."""
        offset = max(offset, 0)
        limit = max(limit, 0)
        with _begin_read(self._engine) as conn:
            total = conn.execute(
                sa.select(sa.func.count()).select_from(checkpoints).where(checkpoints.c.session_id == session_id)
            ).scalar_one()
            rows = conn.execute(
                sa.select(
                    checkpoints.c.checkpoint_id,
                    checkpoints.c.step_count,
                    checkpoints.c.created_at,
                    checkpoints.c.status,
                )
                .where(checkpoints.c.session_id == session_id)
                .order_by(*self._CHECKPOINT_ORDER)
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
            )
            for row in rows
        ]
        return PaginatedCheckpoints(items=items, total=total, has_more=offset + len(items) < total)

    # sub-sessions and usage -------------------------------------------------------------------

    @retrying
    def add_sub_session_refs(self, session_id: str, refs: list[SubSessionRef]) -> None:
        """Record child sessions; a ref that already exists is left as it is (re-executed steps)."""
        if not refs:
            return
        with _begin_write(self._engine) as conn:
            conn.execute(
                self._insert_ignore(sub_session_refs, ["session_id", "sub_session_id"]),
                [{**ref.model_dump(), "session_id": session_id} for ref in refs],
            )

    @retrying
    def update_sub_session_ref(
        self, session_id: str, sub_session_id: str, *, status: str, completed_at: int | None = None
    ) -> None:
        """Update a child session's status (and completion time)."""
        with _begin_write(self._engine) as conn:
            conn.execute(
                sa.update(sub_session_refs)
                .where(
                    sub_session_refs.c.session_id == session_id,
                    sub_session_refs.c.sub_session_id == sub_session_id,
                )
                .values(status=status, completed_at=completed_at)
            )

    @retrying
    def get_sub_session_refs(self, session_id: str) -> list[SubSessionRef]:
        """Return the session's child references, oldest first."""
        with _begin_read(self._engine) as conn:
            return self._read_refs(conn, session_id)

    @retrying
    def get_usage(self, session_id: str, *, run_id: str | None = None) -> list[UsageRecord]:
        """Return the usage records of the session (or of one run), in commit order."""
        stmt = sa.select(usage).where(usage.c.session_id == session_id)
        if run_id is not None:
            stmt = stmt.where(usage.c.run_id == run_id)
        stmt = stmt.order_by(usage.c.created_at, usage.c.run_id, usage.c.step, usage.c.ordinal)
        with _begin_read(self._engine) as conn:
            return [_usage_record(row) for row in conn.execute(stmt)]


def _new_session_values(
    session_id: str,
    *,
    agent_type: str,
    custom_state: dict[str, Any],
    now_ms: int,
    parent_session_id: str | None,
    root_session_id: str | None,
    metadata: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "agent_type": agent_type,
        "status": "active",
        "version": 1,
        "run_id": None,
        "stream_id": session_id,
        "turn": 0,
        "step_count": 0,
        "message_count": 0,
        "custom_state": custom_state,
        "output": None,
        "error": None,
        "parent_session_id": parent_session_id,
        "root_session_id": root_session_id,
        "interrupt_requested": False,
        "interrupt_context": None,
        "resume_count": 0,
        "aborted": False,
        "abort_reason": None,
        "agent_fingerprint": None,
        "metadata": metadata,
        "created_at": now_ms,
        "updated_at": now_ms,
    }


if TYPE_CHECKING:
    _protocol_check: type[SessionStore] = SqlSessionStore
