"""Runs: the entry transaction that opens one, its end without a step commit, and the reads.

``start_run`` locks the session row (``SqlDialect.lock_session``) and still guards its update with
the version it read; ``UNIQUE(session_id, turn)`` on runs is the last line of defence, so two runs
can never share a turn. Exactly one of any number of concurrent callers on one session wins.

The runs in flight are read without scanning sessions (:func:`list_running_runs`), the query
behind orphan detection. An *orphaned* run is recorded ``running`` but its DBOS workflow never
started (the process died between the store transaction and ``DBOS.start_workflow``). Only
``running`` runs can be orphans: a parked run (``suspended`` on a human) or a finished one cannot,
however many there are. The partial index ``ix_helix_runs_running`` holds exactly the ``running``
runs, and callers page through it by run id (keyset pagination), so looking costs the number of
runs in flight and no run is ever skipped; the executor then asks DBOS which of a page's workflows
exist, in one query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.errors import (
    AgentAlreadyRunningError,
    AgentMismatchError,
    AgentNotResumableError,
    HelixError,
    RunIdConflictError,
    SessionNotFoundError,
    StaleStateError,
)
from helix_dbos.session import InterruptContext, RunStatus, SessionStatus
from helix_dbos.store.base import RunRecord, SessionRecord, StartRun, StartRunResult
from helix_dbos.store.dialect import RidingStart, SqlDialect
from helix_dbos.store.engine import begin_read, begin_write
from helix_dbos.store.rows import (
    TERMINAL_RUN_STATUSES,
    context_json,
    new_session_values,
    run_record,
    session_record,
)
from helix_dbos.store.schema import checkpoints, messages, runs, sessions
from helix_dbos.store.tenants import new_session_tenant
from helix_dbos.store.transcript import insert_messages
from helix_dbos.tenancy import DEFAULT_TENANT, check_tenant

__all__ = [
    "finish_run",
    "get_current_run",
    "get_run",
    "list_running_runs",
    "list_runs",
    "start_new_session_alone",
    "start_run",
]

# A literal, not a bound parameter: PostgreSQL uses a partial index only when it can prove the
# query's predicate implies the index's, which a generic plan with a parameter cannot.
_RUNNING = runs.c.status == sa.literal_column("'running'")


def start_run(
    engine: Engine,
    dialect: SqlDialect,
    request: StartRun,
    *,
    stream_sequence: Callable[[Connection], int] | None = None,
    also: Callable[[Connection], object] | None = None,
    riding: RidingStart | None = None,
) -> StartRunResult:
    """Open a run: create or reopen the session, append input, record the run, all or nothing.

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

    ``stream_sequence(conn)``, when given, is read in the transaction and replaces
    ``request.stream_start_sequence``; ``also(conn)`` runs after the writes of a run actually
    started (not for a repeated request). The durable stream reads its latest sequence and activates
    itself this way, so a run's start costs one transaction instead of three. ``riding`` is the same
    stream start as SQL: with it (or with no stream at all), a request that creates its session is
    first tried as one statement (:func:`start_new_session_alone`), and the transaction runs only
    when the session exists.
    """
    if request.new_session_state is not None and (stream_sequence is None or riding is not None):
        created = start_new_session_alone(engine, dialect, request, riding)
        if created is not None:
            return created
    with begin_write(engine) as conn:
        # A request that may create its session inserts it first (``ON CONFLICT DO NOTHING``): a
        # new session, the common case of such a request, costs no read of the row. The insert is
        # the guard: a racing creator waits on it and then finds the row there.
        result = None
        if request.new_session_state is not None:
            result = _create_for_run(conn, dialect, request, stream_sequence)
        if result is None:
            # The session exists (or a racing creator made it first): reopen it under its row lock.
            row = dialect.lock_session(conn, request.session_id)
            if row is None:
                raise SessionNotFoundError(request.session_id)
            if stream_sequence is not None:
                request = request.model_copy(update={"stream_start_sequence": stream_sequence(conn)})
            result = _reopen(conn, request, session_record(row))
        if also is not None and not result.existing:
            also(conn)
        return result


def start_new_session_alone(
    engine: Engine, dialect: SqlDialect, request: StartRun, riding: RidingStart | None = None
) -> StartRunResult | None:
    """A new session's first run as one autocommitted statement; ``None``, having written nothing, otherwise.

    ``None`` when the session exists (the caller then decides: :func:`start_run`'s transaction
    reopens it under its row lock), when ``request`` would not create one, or on a backend without
    the statement (SQLite). The rows are exactly :func:`_create_for_run`'s; with ``riding``, the
    run's ``stream_start_sequence`` is the stream's latest sequence read in the statement, and the
    stream is activated in it.
    """
    if request.new_session_state is None:
        return None
    tenant = None if request.tenant is None else check_tenant(request.tenant)  # None: the parent's, in the statement
    session = _new_session_row(request, tenant or DEFAULT_TENANT)
    run = _run_record(request, turn=1, start_sequence=0)
    try:
        row = dialect.start_new_session_alone(engine, session, run.model_dump(), request.input_messages, tenant, riding)
    except sa.exc.IntegrityError as exc:
        raise _run_id_conflict(exc, request) from None
    if row is None:
        return None
    data = dict(row._mapping)
    sequence = data.pop("run_stream_start_sequence")
    del data["created"]
    run = run.model_copy(update={"stream_start_sequence": int(sequence)})
    return StartRunResult(run=run, session=SessionRecord.model_validate(data), created_session=True)


def _new_session_row(request: StartRun, tenant: str) -> dict[str, Any]:
    """The ``helix_sessions`` row of the session ``request`` creates, with its first run on it."""
    values = new_session_values(
        request.session_id,
        agent_type=request.agent_type,
        custom_state=request.new_session_state or {},
        now_ms=request.now_ms,
        parent_session_id=request.parent_session_id,
        root_session_id=request.root_session_id,
        metadata=request.metadata,
        tenant=tenant,
    )
    values.update(
        turn=1,
        run_id=request.run_id,
        stream_id=request.stream_id or request.session_id,
        message_count=len(request.input_messages),
        agent_fingerprint=request.agent_fingerprint,
    )
    return values


def _create_for_run(
    conn: Connection,
    dialect: SqlDialect,
    request: StartRun,
    stream_sequence: Callable[[Connection], int] | None = None,
) -> StartRunResult | None:
    """Create the session with its first run; ``None``, having written nothing, when it exists already.

    ``stream_sequence(conn)`` is read once the new row is ours (a racing creator waits on it).
    """
    values = _new_session_row(request, new_session_tenant(conn, request.tenant, request.parent_session_id))
    row = conn.execute(_session_insert(dialect), values).first()
    if row is None:
        return None
    if stream_sequence is not None:
        request = request.model_copy(update={"stream_start_sequence": stream_sequence(conn)})
    insert_messages(conn, request.session_id, request.run_id, 0, 0, request.input_messages, request.now_ms)
    run = _insert_run(conn, request, turn=1, start_sequence=0)
    return StartRunResult(run=run, session=session_record(row), created_session=True)


def _reopen(conn: Connection, request: StartRun, session: SessionRecord) -> StartRunResult:
    sid = request.session_id
    if request.tenant is not None and session.tenant != request.tenant:
        # Another tenant's session (a creation race lost to it, or an id it named): not there for this one.
        raise SessionNotFoundError(sid)
    if session.agent_type != request.agent_type:  # checked under the row lock: a session is one agent's
        raise AgentMismatchError(sid, session.agent_type, request.agent_type)
    current: RunRecord | None = None
    if session.run_id is not None:
        run_row = conn.execute(sa.select(runs).where(runs.c.run_id == session.run_id)).first()
        current = None if run_row is None else run_record(run_row)
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
                f"Cannot truncate session {sid!r} to {request.truncate_to} messages: it has {session.message_count}",
                code="validation_error",
            )
        start_sequence = request.truncate_to
        conn.execute(sa.delete(messages).where(messages.c.session_id == sid, messages.c.sequence >= start_sequence))
        # Checkpoints that saw the dropped messages would point past the transcript.
        conn.execute(
            sa.delete(checkpoints).where(checkpoints.c.session_id == sid, checkpoints.c.message_count > start_sequence)
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
        now = conn.execute(sa.select(sessions.c.status, sessions.c.version).where(sessions.c.session_id == sid)).first()
        if now is None:
            raise SessionNotFoundError(sid)
        if now.status == "active":
            raise AgentAlreadyRunningError(sid, now.status)
        raise StaleStateError(sid, session.version, now.version)
    updated = session_record(row)
    insert_messages(conn, sid, request.run_id, 0, start_sequence, request.input_messages, request.now_ms)
    run = _insert_run(conn, request, turn=updated.turn, start_sequence=start_sequence)
    return StartRunResult(run=run, session=updated, created_session=False)


def _run_record(request: StartRun, *, turn: int, start_sequence: int) -> RunRecord:
    return RunRecord(
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


def _insert_run(conn: Connection, request: StartRun, *, turn: int, start_sequence: int) -> RunRecord:
    run = _run_record(request, turn=turn, start_sequence=start_sequence)
    try:
        conn.execute(_RUN_INSERT, run.model_dump())
    except sa.exc.IntegrityError as exc:
        raise _run_id_conflict(exc, request) from None
    return run


def _run_id_conflict(exc: sa.exc.IntegrityError, request: StartRun) -> Exception:
    """A typed refusal when the run id is another run's (nothing was written), never the driver's message.

    Other constraint failures stay what they are.
    """
    if any(name in str(exc.orig) for name in _RUN_ID_CONSTRAINT_NAMES):
        return RunIdConflictError(request.run_id, request.session_id)
    return exc


_RUN_ID_CONSTRAINT_NAMES: Final = ("pk_helix_runs", "helix_runs.run_id")
"""How PostgreSQL and SQLite name ``helix_runs``' primary key in a unique violation."""


# Statements built once: values go in as parameters, so SQLAlchemy neither rebuilds the statement
# nor coerces every value into it on each call (that was most of a run start's client CPU).
_RUN_INSERT: Final = runs.insert()
_SESSION_INSERTS: dict[str, sa.Insert] = {}


def _session_insert(dialect: SqlDialect) -> sa.Insert:
    """``INSERT .. ON CONFLICT (session_id) DO NOTHING RETURNING *`` in ``dialect``'s spelling."""
    stmt = _SESSION_INSERTS.get(dialect.name)
    if stmt is None:
        stmt = _SESSION_INSERTS[dialect.name] = dialect.insert_ignore(sessions, ["session_id"]).returning(*sessions.c)
    return stmt


def finish_run(
    engine: Engine,
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
    with begin_write(engine) as conn:
        updated = conn.execute(
            sa.update(sessions)
            .where(sessions.c.session_id == session_id, sessions.c.run_id == run_id)
            .values(
                status=session_status,
                output=output,
                error=error,
                aborted=aborted,
                abort_reason=abort_reason,
                interrupt_context=context_json(interrupt_context),
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
                completed_at=now_ms if run_status in TERMINAL_RUN_STATUSES else None,
            )
        )


def get_run(engine: Engine, run_id: str) -> RunRecord | None:
    """Return one run record, or ``None``."""
    with begin_read(engine) as conn:
        row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).first()
    return None if row is None else run_record(row)


def get_current_run(engine: Engine, session_id: str) -> RunRecord | None:
    """Return the run with the highest turn, or ``None`` before the first run."""
    with begin_read(engine) as conn:
        row = conn.execute(
            sa.select(runs).where(runs.c.session_id == session_id).order_by(runs.c.turn.desc()).limit(1)
        ).first()
    return None if row is None else run_record(row)


def list_runs(engine: Engine, session_id: str) -> list[RunRecord]:
    """Return all runs of the session by turn (1, 2, 3 ...)."""
    with begin_read(engine) as conn:
        rows = conn.execute(sa.select(runs).where(runs.c.session_id == session_id).order_by(runs.c.turn))
        return [run_record(row) for row in rows]


def list_running_runs(engine: Engine, *, after_run_id: str | None = None, limit: int = 500) -> list[RunRecord]:
    """Runs with status ``running``, by run id, starting after ``after_run_id`` (one page of ``limit``)."""
    stmt = sa.select(runs).where(_RUNNING)
    if after_run_id is not None:
        stmt = stmt.where(runs.c.run_id > after_run_id)
    stmt = stmt.order_by(runs.c.run_id).limit(max(limit, 1))
    with engine.connect() as conn:
        return [run_record(row) for row in conn.execute(stmt)]
