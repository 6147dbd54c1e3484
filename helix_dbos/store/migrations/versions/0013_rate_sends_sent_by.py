"""A send claim records by when its request surely left: ``helix_rate_sends.sent_by``.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

A claim of a provider rate limit's exact gate is an interval ``[claimed_at, sent_by]`` that holds
the request's arrival at the provider (``helix_dbos.runtime.send_gate``). ``sent_by`` is ``NULL``
until the sender reports that the request's bytes left; a new claim counts such a row as still
able to arrive. Rows written before this revision have ``NULL`` and so count until the unsent
bound (seconds), which errs on the safe side during an upgrade. Self-contained on purpose (it does
not import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``helix_rate_sends.sent_by`` (nullable)."""
    with op.batch_alter_table("helix_rate_sends") as batch:
        batch.add_column(sa.Column("sent_by", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop ``helix_rate_sends.sent_by``."""
    with op.batch_alter_table("helix_rate_sends") as batch:
        batch.drop_column("sent_by")
