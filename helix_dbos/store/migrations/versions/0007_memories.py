"""Agent memories, full-text searchable on PostgreSQL, vector-searchable with pgvector.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23

On PostgreSQL this also creates a GIN index on ``to_tsvector('english', content)`` (what
``PostgresMemoryStore`` searches), and the ``vector`` extension when the server has it available
(``pg_available_extensions``): a server without pgvector migrates the same and searches memories by
full text only. Self-contained on purpose (it does not import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PENDING = sa.text("embedding_status = 'pending'")


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    """Create ``helix_memories`` (and, on PostgreSQL, its full-text index and the vector extension)."""
    op.create_table(
        "helix_memories",
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("metadata", _json(), nullable=True),
        sa.Column("embedding_status", sa.String(16), nullable=False),
        sa.Column("embedding", _json(), nullable=True),
        sa.Column("embedding_dimensions", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("memory_id", name=op.f("pk_helix_memories")),
    )
    op.create_index("ix_helix_memories_namespace_created_at", "helix_memories", ["namespace", "created_at"])
    op.create_index(
        "ix_helix_memories_pending", "helix_memories", ["created_at"], postgresql_where=_PENDING, sqlite_where=_PENDING
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE INDEX ix_helix_memories_fts ON helix_memories USING gin (to_tsvector('english', content))")
        op.execute(
            "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') "
            "THEN CREATE EXTENSION IF NOT EXISTS vector; END IF; "
            "EXCEPTION WHEN insufficient_privilege THEN "
            "RAISE NOTICE 'helix-dbos: no privilege to create the vector extension; memories use full-text search'; "
            "END $$"
        )


def downgrade() -> None:
    """Drop ``helix_memories`` (the vector extension stays: other tables may use it)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_helix_memories_fts")  # schema.MEMORIES_FTS_INDEX
    op.drop_index("ix_helix_memories_pending", table_name="helix_memories")
    op.drop_index("ix_helix_memories_namespace_created_at", table_name="helix_memories")
    op.drop_table("helix_memories")
