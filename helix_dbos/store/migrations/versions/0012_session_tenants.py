"""Sessions belong to a tenant: ``helix_sessions.tenant``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

The tenant is recorded when a session is created and inherited by its children and forks
(``helix_dbos.tenancy``). Existing rows, written before tenants existed, get the default tenant
through the column's server default, so a single-tenant deployment upgrades without a data step.
The index serves a tenant's listing (newest first) and its spend. Self-contained on purpose (it does
not import ``schema.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``helix_sessions.tenant`` (default ``'default'``) and its index."""
    with op.batch_alter_table("helix_sessions") as batch:
        batch.add_column(sa.Column("tenant", sa.String(), nullable=False, server_default="default"))
    op.create_index("ix_helix_sessions_tenant_updated_at", "helix_sessions", ["tenant", "updated_at"])


def downgrade() -> None:
    """Drop the index and the column."""
    op.drop_index("ix_helix_sessions_tenant_updated_at", table_name="helix_sessions")
    with op.batch_alter_table("helix_sessions") as batch:
        batch.drop_column("tenant")
