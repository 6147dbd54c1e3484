"""Remote sub-agents: where a child session lives when another service runs it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23

``helix_sub_session_refs.remote``: for a remote sub-agent's session, the remote service's URL, the
agent's name there, the remote run id and the last remote stream sequence the parent proxied into
its own stream (``NULL`` for local children). Self-contained on purpose (it does not import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``helix_sub_session_refs.remote``."""
    column_type = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
    with op.batch_alter_table("helix_sub_session_refs") as batch:
        batch.add_column(sa.Column("remote", column_type, nullable=True))


def downgrade() -> None:
    """Drop ``helix_sub_session_refs.remote``."""
    with op.batch_alter_table("helix_sub_session_refs") as batch:
        batch.drop_column("remote")
