"""Worker heartbeats, for taking over the runs of a worker that died for good.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22

Self-contained on purpose (it does not import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``helix_workers``."""
    op.create_table(
        "helix_workers",
        sa.Column("executor_id", sa.String(), nullable=False),
        sa.Column("app_version", sa.String(), nullable=False),
        sa.Column("hostname", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("heartbeat_at", sa.BigInteger(), nullable=False),
        sa.Column("recovered_at", sa.BigInteger(), nullable=True),
        sa.Column("recovered_by", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("executor_id", name=op.f("pk_helix_workers")),
    )


def downgrade() -> None:
    """Drop ``helix_workers``."""
    op.drop_table("helix_workers")
