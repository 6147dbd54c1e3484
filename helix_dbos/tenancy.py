"""Tenants: who a session belongs to, so one caller's sessions, queue share and spend are its own.

A *tenant* is a short name (``acme``) carried by the caller's principal (:mod:`helix_dbos.service.auth`)
and recorded on a session when it is created. Everything that session starts inherits it: its
children (sub-agents, companions), its forks, its continuations. The service checks it on every
route that names a session, filters every listing by it, enqueues a tenant's runs in the tenant's
partition of the run queue (:mod:`helix_dbos.runtime.queues`), and refuses a tenant's new runs once
its spend reaches its :class:`TenantBudget` (:mod:`helix_dbos.runtime.tenant_budgets`).

A deployment that never names a tenant has one, :data:`DEFAULT_TENANT`, and behaves as before.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.errors import HelixError

__all__ = ["DEFAULT_TENANT", "TENANT_PATTERN", "TenantBudget", "check_tenant"]

DEFAULT_TENANT = "default"
"""The tenant of every session created without one (single-tenant deployments, the Python API)."""

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
"""A tenant name: 1-128 letters, digits and ``_.:@-``, starting with a letter or digit.

Narrow on purpose: a tenant becomes a DBOS queue partition key and a column value, and shows up
in logs, so it should never need escaping.
"""

_TENANT = re.compile(TENANT_PATTERN)


def check_tenant(tenant: str) -> str:
    """``tenant`` when it is a valid tenant name, else a ``validation_error``."""
    if not isinstance(tenant, str) or not _TENANT.match(tenant):
        raise HelixError(
            f"A tenant must be 1-128 letters, digits or _.:@- starting with a letter or digit, got {tenant!r}",
            code="validation_error",
            retryable=False,
        )
    return tenant


class TenantBudget(BaseModel):
    """A cap on what one tenant's runs may spend, checked when the tenant asks for a new run.

    The spend is the tenant's recorded usage (every session it owns, sub-agents' included) since
    ``period_seconds`` ago, or ever when ``period_seconds`` is ``None``. When it has reached
    ``max_cost_usd`` or ``max_total_tokens`` (input plus output), a new run, a resume or a retry is
    refused with :class:`~helix_dbos.errors.TenantBudgetExceededError` (HTTP 429
    ``tenant_budget_exceeded``) before anything is written. Runs already admitted go on: the cap is
    an admission check, not a meter inside the loop (an agent's own :class:`~helix_dbos.Budget` is).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_cost_usd: float | None = Field(default=None, ge=0)
    """Spend cap in US dollars (priced model calls only; an unpriced call counts 0)."""
    max_total_tokens: int | None = Field(default=None, ge=0)
    """Cap on input plus output tokens."""
    period_seconds: float | None = Field(default=None, gt=0)
    """The rolling window the spend is summed over; ``None``: all time."""
