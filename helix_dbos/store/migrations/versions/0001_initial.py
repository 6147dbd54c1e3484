"""Initial helix tables: sessions, messages, runs, checkpoints, sub-session refs, usage.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Written by hand and self-contained (it does not import ``schema.py``, which will move on while this
revision must stay as it shipped). ``tests/store/test_migrations.py`` checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    """Create the helix tables."""
    op.create_table(
        "helix_sessions",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("agent_type", sa.String(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("stream_id", sa.String(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("custom_state", _json(), nullable=False),
        sa.Column("output", _json(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("parent_session_id", sa.String(), nullable=True),
        sa.Column("root_session_id", sa.String(), nullable=True),
        sa.Column("interrupt_requested", sa.Boolean(), nullable=False),
        sa.Column("interrupt_context", _json(), nullable=True),
        sa.Column("resume_count", sa.Integer(), nullable=False),
        sa.Column("aborted", sa.Boolean(), nullable=False),
        sa.Column("abort_reason", sa.Text(), nullable=True),
        sa.Column("agent_fingerprint", sa.String(), nullable=True),
        sa.Column("metadata", _json(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_helix_sessions"),
    )
    op.create_index("ix_helix_sessions_updated_at", "helix_sessions", ["updated_at"])
    op.create_index("ix_helix_sessions_status_updated_at", "helix_sessions", ["status", "updated_at"])
    op.create_index("ix_helix_sessions_parent_session_id", "helix_sessions", ["parent_session_id"])

    op.create_table(
        "helix_messages",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        # Plain JSON (text) on purpose: JSONB would reorder the keys of tool-call arguments.
        sa.Column("message", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "sequence", name="pk_helix_messages"),
    )

    op.create_table(
        "helix_runs",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("completed_at", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("start_sequence", sa.Integer(), nullable=False),
        sa.Column("stream_start_sequence", sa.Integer(), nullable=False),
        sa.Column("workflow_id", sa.String(), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("previous_run_id", sa.String(), nullable=True),
        sa.Column("agent_fingerprint", sa.String(), nullable=True),
        sa.Column("request_key", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name="pk_helix_runs"),
        sa.UniqueConstraint("session_id", "turn", name="uq_helix_runs_session_id_turn"),
    )

    op.create_table(
        "helix_checkpoints",
        sa.Column("checkpoint_id", sa.String(), nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("custom_state", _json(), nullable=False),
        sa.Column("output", _json(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("stream_sequence", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("checkpoint_id", name="pk_helix_checkpoints"),
        sa.UniqueConstraint(
            "session_id", "run_id", "step_count", name="uq_helix_checkpoints_session_id_run_id_step_count"
        ),
    )
    op.create_index("ix_helix_checkpoints_session_id_created_at", "helix_checkpoints", ["session_id", "created_at"])

    op.create_table(
        "helix_sub_session_refs",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("sub_session_id", sa.String(), nullable=False),
        sa.Column("agent_type", sa.String(), nullable=False),
        sa.Column("parent_tool_call_id", sa.String(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("completed_at", sa.BigInteger(), nullable=True),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("name", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("session_id", "sub_session_id", name="pk_helix_sub_session_refs"),
    )

    op.create_table(
        "helix_usage",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("reasoning_tokens", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "run_id", "step", "kind", "name", "ordinal", name="pk_helix_usage"),
    )


def downgrade() -> None:
    """Drop the helix tables (and every session in them)."""
    op.drop_table("helix_usage")
    op.drop_table("helix_sub_session_refs")
    op.drop_index("ix_helix_checkpoints_session_id_created_at", table_name="helix_checkpoints")
    op.drop_table("helix_checkpoints")
    op.drop_table("helix_runs")
    op.drop_table("helix_messages")
    op.drop_index("ix_helix_sessions_parent_session_id", table_name="helix_sessions")
    op.drop_index("ix_helix_sessions_status_updated_at", table_name="helix_sessions")
    op.drop_index("ix_helix_sessions_updated_at", table_name="helix_sessions")
    op.drop_table("helix_sessions")
