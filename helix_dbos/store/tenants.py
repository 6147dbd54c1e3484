"""What the store knows about tenants: a new session's inherited tenant and a tenant's spend.

A session's tenant is written once, when the row is inserted (``helix_sessions.tenant``), and
never updated: children (sub-agents, companions) take their parent's in the same transaction that
creates them, and forks take their source's, so no code path outside the store has to remember to
pass it on.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.store.base import TenantSpend
from helix_dbos.store.engine import begin_read
from helix_dbos.store.schema import sessions, usage
from helix_dbos.tenancy import DEFAULT_TENANT, check_tenant

__all__ = ["new_session_tenant", "tenant_spend"]


def new_session_tenant(conn: Connection, tenant: str | None, parent_session_id: str | None) -> str:
    """The tenant a new session gets: ``tenant`` when given, else its parent's, else the default."""
    if tenant is not None:
        return check_tenant(tenant)
    if parent_session_id is not None:
        found = conn.execute(sa.select(sessions.c.tenant).where(sessions.c.session_id == parent_session_id)).first()
        if found is not None:
            return str(found.tenant)
    return DEFAULT_TENANT


def tenant_spend(engine: Engine, tenant: str, since_ms: int | None) -> TenantSpend:
    """Sum the usage rows of the tenant's sessions recorded at or after ``since_ms``."""
    stmt = (
        sa.select(
            sa.func.coalesce(sa.func.sum(usage.c.cost_usd), 0.0),
            sa.func.coalesce(sa.func.sum(usage.c.input_tokens + usage.c.output_tokens), 0),
        )
        .select_from(usage.join(sessions, sessions.c.session_id == usage.c.session_id))
        .where(sessions.c.tenant == tenant)
    )
    if since_ms is not None:
        stmt = stmt.where(usage.c.created_at >= since_ms)
    with begin_read(engine) as conn:
        cost, tokens = conn.execute(stmt).one()
    return TenantSpend(cost_usd=float(cost), total_tokens=int(tokens))
