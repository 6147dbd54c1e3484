"""The store's tables, as SQLAlchemy Core, for PostgreSQL and SQLite alike.

Every table is prefixed ``helix_`` and lives in the default schema, so the store can share a
database with an application (and with DBOS, whose tables live in schema ``dbos``). Alembic's
version table is ``helix_alembic_version`` for the same reason.

Design notes:

- Timestamps are ``BigInteger`` milliseconds since the epoch, the unit used everywhere else.
- A session row carries everything that changes per step (status, version, counters, custom
  state), so a step commit updates one session row and appends rows elsewhere.
- A checkpoint does not copy the transcript: it records ``message_count`` and the transcript's
  prefix of that length *is* the checkpoint's message list (messages below the count are never
  rewritten; a retry deletes the later ones together with the checkpoints that saw them).
- ``UNIQUE(session_id, run_id, step_count)`` on checkpoints is the idempotency key of a step
  commit: a re-executed commit loses the insert and writes nothing else.
- Message bodies use plain ``JSON`` (text) even on PostgreSQL: ``JSONB`` reorders object keys,
  and a tool call's arguments must come back byte-for-byte so that a replayed prompt stays
  identical (provider prompt caches key on the exact bytes). State-like columns use ``JSONB``.
- Streams (``helix_streams``, ``helix_stream_chunks``; revision 0003) belong to
  :class:`helix_dbos.stream.sql.SqlStreamManager`, whose module docstring explains the columns.
  Chunk bodies are plain ``JSON`` like message bodies: they go out over SSE as stored.
- Produced text (model output, tool results, errors) may hold NUL or lone surrogates, which
  PostgreSQL refuses: JSON documents and the ``EscapedText`` columns store them through the
  reversible escape of :mod:`helix_dbos.store.codec` (the engine's JSON serialiser applies it).
- Memories (``helix_memories``; revision 0007) belong to
  :class:`helix_dbos.memory.postgres.PostgresMemoryStore`. Full-text search uses a GIN index on
  ``to_tsvector('english', content)`` that revision 0007 creates on PostgreSQL only (an expression
  index, so it is not declared here); ``embedding`` is a JSON array that pgvector reads as a
  ``vector`` when the extension is installed.
- ``helix_sessions.tenant`` (revision 0012) is the session's tenant (:mod:`helix_dbos.tenancy`);
  rows written before it belong to the default tenant.
- ``helix_rate_sends.sent_by`` (revision 0013) bounds a send claim's arrival at the provider
  (:mod:`helix_dbos.runtime.send_gate`); ``NULL`` until the sender reports its send.
- ``helix_sub_session_refs.deadline_ms`` (revision 0014) is when a parent's sub-agent call gives
  up on its child (:mod:`helix_dbos.runtime.child_deadlines`); ``NULL`` when the tool has no
  timeout and on rows written before it.
- This module and ``migrations/versions`` must agree exactly; ``tests/store/test_migrations.py``
  compares them.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from helix_dbos.store.codec import EscapedString, EscapedText
from helix_dbos.tenancy import DEFAULT_TENANT

SCHEMA_REVISION = "0014"
"""The alembic head revision this version of helix-dbos reads and writes."""

VERSION_TABLE = "helix_alembic_version"
"""Alembic's version table for the helix tables (never the application's ``alembic_version``)."""

TABLE_PREFIX = "helix_"

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)
"""All helix tables; ``alembic`` autogenerate compares against it."""


def json_type() -> sa.types.TypeEngine[Any]:
    """JSON on SQLite, JSONB on PostgreSQL; Python ``None`` is stored as SQL ``NULL``."""
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def verbatim_json_type() -> sa.types.TypeEngine[Any]:
    """JSON kept as text on both backends, so object key order survives the round trip."""
    return sa.JSON(none_as_null=True)


sessions = sa.Table(
    "helix_sessions",
    metadata,
    sa.Column("session_id", sa.String(), primary_key=True),
    sa.Column("agent_type", sa.String(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("version", sa.Integer(), nullable=False),
    sa.Column("run_id", sa.String(), nullable=True),
    sa.Column("stream_id", sa.String(), nullable=False),
    sa.Column("turn", sa.Integer(), nullable=False),
    sa.Column("step_count", sa.Integer(), nullable=False),
    sa.Column("message_count", sa.Integer(), nullable=False),
    sa.Column("custom_state", json_type(), nullable=False),
    sa.Column("output", json_type(), nullable=True),
    sa.Column("error", EscapedText(), nullable=True),
    sa.Column("parent_session_id", sa.String(), nullable=True),
    sa.Column("root_session_id", sa.String(), nullable=True),
    sa.Column("interrupt_requested", sa.Boolean(), nullable=False),
    sa.Column("interrupt_context", json_type(), nullable=True),
    sa.Column("resume_count", sa.Integer(), nullable=False),
    sa.Column("aborted", sa.Boolean(), nullable=False),
    sa.Column("abort_reason", EscapedText(), nullable=True),
    sa.Column("agent_fingerprint", sa.String(), nullable=True),
    sa.Column("metadata", json_type(), nullable=True),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
    sa.Column("updated_at", sa.BigInteger(), nullable=False),
    # Who the session belongs to (revision 0012): set at creation, inherited by children and forks.
    sa.Column("tenant", sa.String(), nullable=False, server_default=DEFAULT_TENANT),
    # list_sessions: newest first, optionally filtered by status.
    sa.Index(None, "updated_at"),
    sa.Index(None, "status", "updated_at"),
    sa.Index(None, "parent_session_id"),
    # A tenant's listing and its spend (usage joined to its sessions).
    sa.Index(None, "tenant", "updated_at"),
)

messages = sa.Table(
    "helix_messages",
    metadata,
    sa.Column("session_id", sa.String(), primary_key=True),
    sa.Column("sequence", sa.Integer(), primary_key=True),
    sa.Column("run_id", sa.String(), nullable=True),
    # Step of the run that produced the message (0 for a run's input messages).
    sa.Column("step", sa.Integer(), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("message", verbatim_json_type(), nullable=False),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
)

runs = sa.Table(
    "helix_runs",
    metadata,
    sa.Column("run_id", sa.String(), primary_key=True),
    sa.Column("session_id", sa.String(), nullable=False),
    sa.Column("turn", sa.Integer(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("step_count", sa.Integer(), nullable=False),
    sa.Column("started_at", sa.BigInteger(), nullable=False),
    sa.Column("completed_at", sa.BigInteger(), nullable=True),
    sa.Column("error", EscapedText(), nullable=True),
    sa.Column("start_sequence", sa.Integer(), nullable=False),
    sa.Column("stream_start_sequence", sa.Integer(), nullable=False),
    sa.Column("workflow_id", sa.String(), nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("previous_run_id", sa.String(), nullable=True),
    sa.Column("agent_fingerprint", sa.String(), nullable=True),
    sa.Column("request_key", sa.String(), nullable=True),
    # One run per turn: the last line of defence against two concurrent starts. Its index
    # (session_id first) also serves every per-session lookup, so no separate session index.
    sa.UniqueConstraint("session_id", "turn"),
    # Runs in flight only (store/runs.py): orphan detection costs what is running, not what is stored.
    sa.Index(
        "ix_helix_runs_running",
        "run_id",
        postgresql_where=sa.text("status = 'running'"),
        sqlite_where=sa.text("status = 'running'"),
    ),
)

checkpoints = sa.Table(
    "helix_checkpoints",
    metadata,
    sa.Column("checkpoint_id", sa.String(), primary_key=True),
    sa.Column("session_id", sa.String(), nullable=False),
    sa.Column("run_id", sa.String(), nullable=False),
    sa.Column("step_count", sa.Integer(), nullable=False),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("custom_state", json_type(), nullable=False),
    sa.Column("output", json_type(), nullable=True),
    sa.Column("error", EscapedText(), nullable=True),
    sa.Column("message_count", sa.Integer(), nullable=False),
    sa.Column("stream_sequence", sa.Integer(), nullable=False),
    sa.UniqueConstraint("session_id", "run_id", "step_count"),
    sa.Index(None, "session_id", "created_at"),
)

sub_session_refs = sa.Table(
    "helix_sub_session_refs",
    metadata,
    sa.Column("session_id", sa.String(), primary_key=True),
    sa.Column("sub_session_id", sa.String(), primary_key=True),
    sa.Column("agent_type", sa.String(), nullable=False),
    sa.Column("parent_tool_call_id", sa.String(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("started_at", sa.BigInteger(), nullable=False),
    sa.Column("completed_at", sa.BigInteger(), nullable=True),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("name", sa.String(), nullable=True),
    # A remote sub-agent's service, agent, run and the last remote stream sequence proxied (0009).
    sa.Column("remote", json_type(), nullable=True),
    # When the parent's call gives up on the child (its tool's timeout_ms), for the sweep (0014).
    sa.Column("deadline_ms", sa.BigInteger(), nullable=True),
    # Running references with a deadline only: the workers' sweep costs what is watched.
    sa.Index(
        "ix_helix_sub_session_refs_deadline",
        "deadline_ms",
        postgresql_where=sa.text("status = 'running' AND deadline_ms IS NOT NULL"),
        sqlite_where=sa.text("status = 'running' AND deadline_ms IS NOT NULL"),
    ),
)

usage = sa.Table(
    "helix_usage",
    metadata,
    # The key makes a re-executed commit unable to double count. ``ordinal`` is the record's
    # position within its commit, so two calls of the same tool in one step both count.
    sa.Column("session_id", sa.String(), primary_key=True),
    sa.Column("run_id", sa.String(), primary_key=True),
    sa.Column("step", sa.Integer(), primary_key=True),
    sa.Column("kind", sa.String(32), primary_key=True),
    sa.Column("name", EscapedString(), primary_key=True),
    sa.Column("ordinal", sa.Integer(), primary_key=True),
    sa.Column("input_tokens", sa.BigInteger(), nullable=False),
    sa.Column("output_tokens", sa.BigInteger(), nullable=False),
    sa.Column("cached_input_tokens", sa.BigInteger(), nullable=False),
    sa.Column("reasoning_tokens", sa.BigInteger(), nullable=False),
    sa.Column("value", sa.Float(), nullable=True),
    sa.Column("success", sa.Boolean(), nullable=False),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
    sa.Column("cost_usd", sa.Float(), nullable=True),
)

pending_tool_calls = sa.Table(
    "helix_pending_tool_calls",
    metadata,
    # One row per client-executed or approval-gated call; see ``helix_dbos.store.hitl``.
    sa.Column("session_id", sa.String(), primary_key=True),
    sa.Column("tool_call_id", sa.String(), primary_key=True),
    sa.Column("run_id", sa.String(), nullable=False),
    sa.Column("workflow_id", sa.String(), nullable=False),
    sa.Column("tool_name", sa.String(), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("arguments", verbatim_json_type(), nullable=False),
    sa.Column("arguments_digest", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("delivery", sa.String(16), nullable=False),
    sa.Column("submission", json_type(), nullable=True),
    sa.Column("deadline_ms", sa.BigInteger(), nullable=True),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
    sa.Column("answered_at", sa.BigInteger(), nullable=True),
    sa.Index("ix_helix_pending_tool_calls_open", "status", "delivery", "deadline_ms"),
)

streams = sa.Table(
    "helix_streams",
    metadata,
    sa.Column("stream_id", sa.String(), primary_key=True),
    # active | paused | ended | failed
    sa.Column("status", sa.String(16), nullable=False),
    # Highest sequence ever assigned; its row lock is what orders concurrent writers.
    sa.Column("latest_sequence", sa.BigInteger(), nullable=False),
    sa.Column("chunk_count", sa.BigInteger(), nullable=False),
    # Bumped when an ended stream is reactivated or a stream is reset: a reader attached before
    # that finishes at ``end_sequence`` instead of following the next turn.
    sa.Column("activation", sa.Integer(), nullable=False),
    # ``latest_sequence`` at the last end/fail/reset and that end's failure message; both survive
    # a reactivation.
    sa.Column("end_sequence", sa.BigInteger(), nullable=True),
    sa.Column("error", EscapedText(), nullable=True),
    # The truncation marker of cleanup_to_step (seed 002, G4 on marker/poll transports): how many
    # cleanups removed chunks, the step of the last one, the high-water mark at it and the highest
    # sequence it removed.
    sa.Column("truncation_epoch", sa.Integer(), nullable=False),
    sa.Column("truncated_at_step", sa.Integer(), nullable=True),
    sa.Column("truncation_sequence", sa.BigInteger(), nullable=True),
    sa.Column("truncation_max_removed", sa.BigInteger(), nullable=True),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
    sa.Column("updated_at", sa.BigInteger(), nullable=False),
)

stream_chunks = sa.Table(
    "helix_stream_chunks",
    metadata,
    sa.Column("stream_id", sa.String(), primary_key=True),
    sa.Column("sequence", sa.BigInteger(), primary_key=True),
    sa.Column("run_id", sa.String(), nullable=True),
    # The chunk's ``step``: cleanup_to_step deletes by it (NULL: a cleanup never removes the chunk).
    sa.Column("step", sa.Integer(), nullable=True),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("chunk", verbatim_json_type(), nullable=False),
    # Idempotency key of a chunk that a replayed workflow writes again; NULLs never collide.
    sa.Column("dedupe_key", sa.String(), nullable=True),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
    sa.UniqueConstraint("stream_id", "dedupe_key"),
)

workers = sa.Table(
    "helix_workers",
    metadata,
    # One row per executor id: heartbeats, so a live worker can take over the runs of a dead one.
    sa.Column("executor_id", sa.String(), primary_key=True),
    sa.Column("app_version", sa.String(), nullable=False),
    sa.Column("hostname", sa.String(), nullable=False),
    sa.Column("pid", sa.Integer(), nullable=False),
    sa.Column("started_at", sa.BigInteger(), nullable=False),
    sa.Column("heartbeat_at", sa.BigInteger(), nullable=False),
    sa.Column("recovered_at", sa.BigInteger(), nullable=True),
    sa.Column("recovered_by", sa.String(), nullable=True),
    # Which process holds the id beyond its pid (boot id and start time; NULL: unknown) (0010).
    sa.Column("process_token", sa.String(), nullable=True),
)

memories = sa.Table(
    "helix_memories",
    metadata,
    sa.Column("memory_id", sa.String(), primary_key=True),
    sa.Column("namespace", sa.String(), nullable=False),
    sa.Column("content", EscapedText(), nullable=False),
    sa.Column("metadata", json_type(), nullable=True),
    # pending | complete | failed (helix_dbos.memory.base.EmbeddingStatus)
    sa.Column("embedding_status", sa.String(16), nullable=False),
    sa.Column("embedding", json_type(), nullable=True),
    sa.Column("embedding_dimensions", sa.Integer(), nullable=True),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
    sa.Column("updated_at", sa.BigInteger(), nullable=False),
    sa.Index(None, "namespace", "created_at"),
    # list_pending: what the embedding executor has not finished.
    sa.Index(
        "ix_helix_memories_pending",
        "created_at",
        postgresql_where=sa.text("embedding_status = 'pending'"),
        sqlite_where=sa.text("embedding_status = 'pending'"),
    ),
)

MEMORIES_FTS_INDEX = "ix_helix_memories_fts"
"""The GIN index on ``to_tsvector('english', content)`` that revision 0007 creates on PostgreSQL only.

An expression index on one backend, so it is not declared on the table above (autogenerate cannot
compare it); ``tests/store/test_migrations.py`` checks it exists on PostgreSQL instead."""

locks = sa.Table(
    "helix_locks",
    metadata,
    # One row per held resource of ``helix_dbos.lock.PostgresLockManager`` (revision 0008); its fencing
    # tokens come from the sequence ``helix_lock_fencing_tokens`` (PostgreSQL only).
    sa.Column("resource", sa.String(), primary_key=True),
    sa.Column("lock_id", sa.String(), nullable=False),
    sa.Column("holder_id", sa.String(), nullable=False),
    sa.Column("fencing_token", sa.BigInteger(), nullable=False),
    sa.Column("acquired_at", sa.BigInteger(), nullable=False),
    sa.Column("expires_at", sa.BigInteger(), nullable=False),
)

rate_sends = sa.Table(
    "helix_rate_sends",
    metadata,
    # One row per model call a provider rate limit let go, stamped with the database's clock in
    # epoch seconds (``helix_dbos.runtime.send_gate``); pruned once it no longer counts (0011).
    sa.Column("limit_name", sa.String(), primary_key=True),
    sa.Column("claimed_at", sa.Float(), primary_key=True),
    # By when the request surely reached the provider, reported by its sender once the bytes left;
    # NULL until then (the claim counts as if it could still arrive) (0013).
    sa.Column("sent_by", sa.Float(), nullable=True),
)

ALL_TABLES: tuple[sa.Table, ...] = (
    sessions,
    messages,
    runs,
    checkpoints,
    sub_session_refs,
    usage,
    pending_tool_calls,
    streams,
    stream_chunks,
    workers,
    memories,
    locks,
    rate_sends,
)
"""Every helix table (the alembic version table excluded)."""


MARK_APPLIED = (
    sa.update(pending_tool_calls)
    .where(
        pending_tool_calls.c.session_id == sa.bindparam("sid"),
        pending_tool_calls.c.tool_call_id.in_(sa.bindparam("ids", expanding=True)),
        pending_tool_calls.c.status.in_(["answered", "expired"]),
    )
    .values(status="applied")
)
"""``answered``/``expired`` -> ``applied`` for the calls ``ids`` of session ``sid`` (idempotent), built once."""
