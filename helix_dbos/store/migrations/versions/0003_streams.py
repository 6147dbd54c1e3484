"""Durable streams: helix_streams and helix_stream_chunks (``SqlStreamManager``).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Self-contained on purpose (it does not import ``schema.py``); ``tests/store/test_migrations.py``
checks that migrations and schema agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the stream tables."""
    op.create_table(
        "helix_streams",
        sa.Column("stream_id", sa.String(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("latest_sequence", sa.BigInteger(), nullable=False),
        sa.Column("chunk_count", sa.BigInteger(), nullable=False),
        sa.Column("activation", sa.Integer(), nullable=False),
        sa.Column("end_sequence", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("truncation_epoch", sa.Integer(), nullable=False),
        sa.Column("truncated_at_step", sa.Integer(), nullable=True),
        sa.Column("truncation_sequence", sa.BigInteger(), nullable=True),
        sa.Column("truncation_max_removed", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", name="pk_helix_streams"),
    )
    op.create_table(
        "helix_stream_chunks",
        sa.Column("stream_id", sa.String(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("type", sa.String(32), nullable=False),
        # Plain JSON (text) on purpose, as for helix_messages: chunks go out over SSE as stored.
        sa.Column("chunk", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("dedupe_key", sa.String(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", "sequence", name="pk_helix_stream_chunks"),
        sa.UniqueConstraint("stream_id", "dedupe_key", name="uq_helix_stream_chunks_stream_id_dedupe_key"),
    )


def downgrade() -> None:
    """Drop the stream tables (and every stored chunk)."""
    op.drop_table("helix_stream_chunks")
    op.drop_table("helix_streams")
