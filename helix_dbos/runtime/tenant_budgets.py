"""Per-tenant budgets: refuse a tenant's new run once its recorded spend reached its cap.

The simplest honest design, chosen over a meter inside the run loop:

- **Where**: at admission, in :class:`~helix_dbos.runtime.starting.RunStarter`, before a new run,
  a resume or a retry writes anything. The tenant's spend is one query over its recorded usage
  (:meth:`~helix_dbos.store.base.SessionStore.tenant_spend`), so every process on the database sees
  the same total and no counter has to be kept in step with the usage rows.
- **What it does not do**: stop runs already admitted (an agent's own
  :class:`~helix_dbos.Budget` meters a run between its steps), or refuse what an admitted run
  goes on to do: its sub-agents and companions, and the continuation a tool answer starts, are part
  of work already let in. A tenant can therefore overshoot its cap by what its runs in flight spend.
- **Replay**: nothing here runs inside a workflow, so no recorded step changes.
"""

from __future__ import annotations

from helix_dbos.errors import TenantBudgetExceededError
from helix_dbos.store.base import SessionStore, TenantSpend
from helix_dbos.tenancy import TenantBudget

__all__ = ["check_tenant_budget", "over_budget"]


def over_budget(spend: TenantSpend, budget: TenantBudget) -> tuple[str, str] | None:
    """``(spent, limit)`` as text for the first cap ``spend`` has reached, else ``None`` (pure)."""
    if budget.max_cost_usd is not None and spend.cost_usd >= budget.max_cost_usd:
        return f"${spend.cost_usd:.4f}", f"${budget.max_cost_usd:.4f}"
    if budget.max_total_tokens is not None and spend.total_tokens >= budget.max_total_tokens:
        return f"{spend.total_tokens} tokens", f"{budget.max_total_tokens} tokens"
    return None


def check_tenant_budget(store: SessionStore, tenant: str, budget: TenantBudget, now_ms: int) -> None:
    """Raise :class:`TenantBudgetExceededError` when ``tenant`` has spent its ``budget``."""
    since = None if budget.period_seconds is None else now_ms - int(budget.period_seconds * 1000)
    reached = over_budget(store.tenant_spend(tenant, since_ms=since), budget)
    if reached is not None:
        spent, limit = reached
        raise TenantBudgetExceededError(tenant, spent, limit, periodic=budget.period_seconds is not None)
