"""A sub-agent child's deadline on its parent's reference: ``helix_sub_session_refs.deadline_ms``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28

A sub-agent tool's ``timeout_ms`` gives its child a deadline. The process running the child keeps
it in memory; a child parked on its own children has no run there, so when that process dies the
deadline is kept by nobody until the child runs again. Stored on the parent's reference, the
workers' sweep finds such children and stops them (``SqlPendingCallStore.children_past_deadline``).
The partial index holds only running references with a deadline, so the sweep costs what is
watched, not what is stored. Rows written before this revision have ``NULL``: their deadline stays
with the process that runs the child, as before. Self-contained on purpose (it does not import
``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WATCHED = sa.text("status = 'running' AND deadline_ms IS NOT NULL")


def upgrade() -> None:
    """Add ``helix_sub_session_refs.deadline_ms`` (nullable) and ``ix_helix_sub_session_refs_deadline``."""
    with op.batch_alter_table("helix_sub_session_refs") as batch:
        batch.add_column(sa.Column("deadline_ms", sa.BigInteger(), nullable=True))
    op.create_index(
        "ix_helix_sub_session_refs_deadline",
        "helix_sub_session_refs",
        ["deadline_ms"],
        postgresql_where=_WATCHED,
        sqlite_where=_WATCHED,
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_index("ix_helix_sub_session_refs_deadline", table_name="helix_sub_session_refs")
    with op.batch_alter_table("helix_sub_session_refs") as batch:
        batch.drop_column("deadline_ms")
