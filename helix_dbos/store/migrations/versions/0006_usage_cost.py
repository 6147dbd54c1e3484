"""The cost of each LLM call, next to its tokens.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

``helix_usage.cost_usd``: what the call cost in USD, priced from LiteLLM's local cost map when the
call was made (``NULL`` for a model the map does not know, and for rows written before this
revision). Self-contained on purpose (it does not import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``helix_usage.cost_usd``."""
    with op.batch_alter_table("helix_usage") as batch:
        batch.add_column(sa.Column("cost_usd", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop ``helix_usage.cost_usd``."""
    with op.batch_alter_table("helix_usage") as batch:
        batch.drop_column("cost_usd")
