"""A partial index of the runs in flight, for orphan detection at start-up.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

``launch()`` looks for runs recorded ``running`` whose DBOS workflow never started. This index holds
only ``running`` runs, so that query costs the number of runs in flight, not the number of sessions
(parked and finished ones are never in it). Self-contained on purpose (it does not import
``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUNNING = sa.text("status = 'running'")


def upgrade() -> None:
    """Create ``ix_helix_runs_running``."""
    op.create_index("ix_helix_runs_running", "helix_runs", ["run_id"], postgresql_where=_RUNNING, sqlite_where=_RUNNING)


def downgrade() -> None:
    """Drop ``ix_helix_runs_running``."""
    op.drop_index("ix_helix_runs_running", table_name="helix_runs")
