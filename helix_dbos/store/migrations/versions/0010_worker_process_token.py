"""Which process holds an executor id: ``helix_workers.process_token``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26

``process_token`` names the process behind a worker row beyond its pid (the machine's boot id and
the process's start time, where the operating system tells them), so that a process starting on the
same machine can tell a live holder of an executor id from a dead one whose pid was reused.
``NULL``: unknown (a row written before this revision, or an OS without ``/proc``). A released row
(a clean shutdown) has ``pid`` 0. Self-contained on purpose (it does not import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``helix_workers.process_token``."""
    with op.batch_alter_table("helix_workers") as batch:
        batch.add_column(sa.Column("process_token", sa.String(), nullable=True))


def downgrade() -> None:
    """Drop ``helix_workers.process_token``."""
    with op.batch_alter_table("helix_workers") as batch:
        batch.drop_column("process_token")
