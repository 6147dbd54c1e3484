"""The lock manager's table and fencing-token sequence.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

``helix_locks`` holds one row per held resource of :class:`helix_dbos.lock.PostgresLockManager`;
``helix_lock_fencing_tokens`` hands out its fencing tokens (PostgreSQL only: the lock manager needs
PostgreSQL, and SQLite has no sequences). Self-contained on purpose (it does not import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``helix_locks`` (and, on PostgreSQL, ``helix_lock_fencing_tokens``)."""
    op.create_table(
        "helix_locks",
        sa.Column("resource", sa.String(), nullable=False),
        sa.Column("lock_id", sa.String(), nullable=False),
        sa.Column("holder_id", sa.String(), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("resource", name="pk_helix_locks"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE SEQUENCE helix_lock_fencing_tokens")


def downgrade() -> None:
    """Drop ``helix_locks`` and its sequence."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP SEQUENCE helix_lock_fencing_tokens")
    op.drop_table("helix_locks")
