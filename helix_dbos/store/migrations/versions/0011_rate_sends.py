"""The send claims of provider rate limits: ``helix_rate_sends``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27

One row per model call a :class:`helix_dbos.ProviderRateLimit` let reach its provider, stamped with
the database's clock when the call claimed its send slot (``helix_dbos.runtime.send_gate``). Rows
older than the limit's window are pruned by the next claim. Self-contained on purpose (it does not
import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``helix_rate_sends``."""
    op.create_table(
        "helix_rate_sends",
        sa.Column("limit_name", sa.String(), nullable=False),
        sa.Column("claimed_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("limit_name", "claimed_at", name="pk_helix_rate_sends"),
    )


def downgrade() -> None:
    """Drop ``helix_rate_sends``."""
    op.drop_table("helix_rate_sends")
