"""A new session's first run as ONE autocommitted statement on PostgreSQL (``SqlDialect.start_new_session_alone``).

The transaction path of a run's start (:func:`helix_dbos.store.runs.start_run`) costs ``BEGIN``, the
session insert, the stream's latest sequence, the input messages, the run, the stream's activation
and ``COMMIT``: seven round trips, each a millisecond of the caller's CPU under load (issue 32). When
the start creates its session, nothing in it needs a read first: the session insert (``ON CONFLICT
DO NOTHING``) is the gate, and every other write hangs off its ``RETURNING`` row, as the step
commit's do (:mod:`helix_dbos.store.postgres`). A parent's tenant is inherited in a subquery.

When the session exists already (the insert returned nothing) the guard column divides by zero:
the statement fails whole, so nothing is written (a riding stream activation included), and the
caller takes the transaction path, which reopens the session under its row lock. A racing creator
waits on the insert's unique index and then finds the row there, as in the transaction.

The result row is built on the join with ``new_session`` (the insert) before its columns read ``r``,
so the session row is taken first and the stream row (the unreferenced activation, run when the
statement ends) after: the order every other writer of a session takes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Engine

from helix_dbos.messages import Message
from helix_dbos.store import alone, codec
from helix_dbos.store.dialect import RidingStart
from helix_dbos.store.rows import dump_message
from helix_dbos.store.schema import sessions
from helix_dbos.tenancy import DEFAULT_TENANT

__all__ = ["DIVISION_BY_ZERO", "run_alone", "start_params", "start_statement"]

_START: Final = """
WITH new_session AS (
    INSERT INTO helix_sessions (session_id, agent_type, status, version, run_id, stream_id, turn, step_count,
                                message_count, custom_state, output, error, parent_session_id, root_session_id,
                                interrupt_requested, interrupt_context, resume_count, aborted, abort_reason,
                                agent_fingerprint, metadata, created_at, updated_at, tenant)
    VALUES (:sid, :agent_type, 'active', 1, :rid, :stream_id, 1, 0,
            :message_count, CAST(:custom_state AS jsonb), NULL, NULL, :parent, :root,
            false, NULL, 0, false, NULL,
            :fingerprint, CAST(:metadata AS jsonb), :now, :now,
            COALESCE(CAST(:tenant AS varchar),
                     (SELECT p.tenant FROM helix_sessions p WHERE p.session_id = CAST(:parent AS varchar)),
                     :default_tenant))
    ON CONFLICT (session_id) DO NOTHING
    RETURNING *
), m AS (
    INSERT INTO helix_messages (session_id, sequence, run_id, step, role, message, created_at)
    SELECT :sid, t.ord - 1, :rid, 0, t.x ->> 'role', t.x, :now
    FROM new_session, json_array_elements(CAST(:messages AS json)) WITH ORDINALITY AS t(x, ord)
), r AS (
    INSERT INTO helix_runs (run_id, session_id, turn, status, step_count, started_at, completed_at, error,
                            start_sequence, stream_start_sequence, workflow_id, mode, previous_run_id,
                            agent_fingerprint, request_key)
    SELECT :rid, :sid, 1, 'running', 0, :now, NULL, NULL, 0, {sequence}, :workflow_id, :mode, :previous_run_id,
           :fingerprint, :request_key
    FROM new_session
    RETURNING stream_start_sequence
){riding}
SELECT new_session.*, (SELECT stream_start_sequence FROM r) AS run_stream_start_sequence,
       1 / CAST(EXISTS (SELECT 1 FROM new_session) AS int) AS created
FROM (SELECT 1) AS one LEFT JOIN new_session ON true
"""
"""The statement; ``{sequence}`` is the run's first stream sequence (a parameter, or a riding
stream's read of it), ``{riding}`` a riding stream start's CTEs (with their leading comma)."""

DIVISION_BY_ZERO: Final = alone.DIVISION_BY_ZERO
"""The SQLSTATE of a statement whose guard failed it (the session exists)."""

_COLUMNS: Final = (*sessions.c, sa.column("run_stream_start_sequence", sa.Integer), sa.column("created", sa.Integer))
"""The result's columns, typed as the session insert's ``RETURNING`` row is in the transaction path."""


@functools.lru_cache(maxsize=8)
def start_statement(sequence: str, ctes: str) -> sa.TextualSelect:
    """The statement for a riding stream start's ``sequence`` and ``ctes`` (constant per writer: cached)."""
    riding = f", {ctes}" if ctes else ""
    # Layout dropped: fewer bytes per start (the text stays far below psycopg's 4096-character parse cache).
    return sa.text(" ".join(_START.format(sequence=sequence, riding=riding).split())).columns(*_COLUMNS)


def start_params(
    session: dict[str, Any],
    run: dict[str, Any],
    input_messages: Sequence[Message],
    tenant: str | None,
    riding: RidingStart | None,
) -> dict[str, Any]:
    """The statement's parameters: the new session's row values, the run's, the input messages.

    ``tenant`` ``None``: the parent's (read in the statement), else the default tenant. JSON goes in
    as text through the codec, as the engine's serialiser writes it in the transaction path; each
    message is serialised alone so that its stored text is exactly the transaction path's.
    """
    metadata = session["metadata"]
    params = {
        "sid": session["session_id"],
        "agent_type": session["agent_type"],
        "rid": run["run_id"],
        "stream_id": session["stream_id"],
        "message_count": len(input_messages),
        "custom_state": codec.dumps(session["custom_state"]),
        "parent": session["parent_session_id"],
        "root": session["root_session_id"],
        "fingerprint": run["agent_fingerprint"],
        "metadata": None if metadata is None else codec.dumps(metadata),
        "now": session["created_at"],
        "tenant": tenant,
        "default_tenant": DEFAULT_TENANT,
        "messages": "[" + ",".join(codec.dumps(dump_message(m)) for m in input_messages) + "]",
        "workflow_id": run["workflow_id"],
        "mode": run["mode"],
        "previous_run_id": run["previous_run_id"],
        "request_key": run["request_key"],
    }
    if riding is None:
        params["stream_start_sequence"] = run["stream_start_sequence"]
        return params
    if not riding.params.keys().isdisjoint(params):
        raise ValueError(f"riding parameters {sorted(riding.params.keys() & params.keys())} collide with the start's")
    return {**params, **riding.params}


def run_alone(engine: Engine, statement: sa.TextualSelect, params: dict[str, Any]) -> sa.Row[Any] | None:
    """Run the statement on an autocommit connection; ``None`` when the guard failed it (nothing written)."""
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        try:
            return conn.execute(statement, params).one()
        except sa.exc.DataError as error:
            if getattr(error.orig, "sqlstate", None) == DIVISION_BY_ZERO:
                return None
            raise
