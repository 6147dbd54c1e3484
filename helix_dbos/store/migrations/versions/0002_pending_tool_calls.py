"""Pending tool calls: durable human-in-the-loop requests and their answers.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Self-contained on purpose (it does not import ``schema.py``); ``tests/store/test_migrations.py``
checks that migrations and schema agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def _verbatim_json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True)


def upgrade() -> None:
    """Create ``helix_pending_tool_calls``."""
    op.create_table(
        "helix_pending_tool_calls",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("tool_call_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("workflow_id", sa.String(), nullable=False),
        sa.Column("tool_name", sa.String(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("arguments", _verbatim_json(), nullable=False),
        sa.Column("arguments_digest", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("delivery", sa.String(16), nullable=False),
        sa.Column("submission", _json(), nullable=True),
        sa.Column("deadline_ms", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("answered_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("session_id", "tool_call_id", name=op.f("pk_helix_pending_tool_calls")),
    )
    op.create_index(
        "ix_helix_pending_tool_calls_open", "helix_pending_tool_calls", ["status", "delivery", "deadline_ms"]
    )


def downgrade() -> None:
    """Drop ``helix_pending_tool_calls``."""
    op.drop_index("ix_helix_pending_tool_calls_open", table_name="helix_pending_tool_calls")
    op.drop_table("helix_pending_tool_calls")
