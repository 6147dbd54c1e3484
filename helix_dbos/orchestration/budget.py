"""Budget decisions, purely: has a run crossed its limits, and what does an approval raise them to.

The loop asks :func:`budget_crossing` between steps with what has been spent so far (computed from
recorded usage, so a replay decides the same), and suspends the run for an approval when it gets a
:class:`BudgetCrossing`. The crossing's :meth:`~BudgetCrossing.arguments` are what the approver is
shown (and what the approval's digest binds); :func:`raised_limits` is the stated rule an approval
applies: each crossed limit becomes *what was used at the crossing plus the configured limit*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from helix_dbos.usage import Budget

__all__ = ["BudgetCrossing", "BudgetLimits", "Spend", "budget_crossing", "initial_limits", "raised_limits"]

LimitName = Literal["max_tokens", "max_cost_usd"]


@dataclass(frozen=True)
class Spend:
    """What counts against a budget: billed tokens and billed USD (failed attempts included)."""

    tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.tokens + other.tokens, self.cost_usd + other.cost_usd)


@dataclass(frozen=True)
class BudgetLimits:
    """The limits in force (the budget's, or higher after approvals); ``None``: no limit."""

    max_tokens: float | None = None
    max_cost_usd: float | None = None

    def get(self, name: LimitName) -> float | None:
        return self.max_tokens if name == "max_tokens" else self.max_cost_usd


@dataclass(frozen=True)
class BudgetCrossing:
    """Limits reached: ``exceeded`` maps each to ``(limit, used)``; ``raise_to`` is what approving sets."""

    scope: Literal["run", "session"]
    exceeded: dict[str, tuple[float, float]]
    raise_to: dict[str, float]

    def arguments(self) -> dict[str, Any]:
        """What the approval request shows (JSON): the scope, each limit with its use, the raise."""
        return {
            "scope": self.scope,
            "exceeded": {name: {"limit": limit, "used": used} for name, (limit, used) in self.exceeded.items()},
            "raise_to": dict(self.raise_to),
        }

    def message(self) -> str:
        """A sentence naming each crossed limit, e.g. ``max_tokens 1000 (used 1234)``."""
        parts = [f"{name} {_num(limit)} (used {_num(used)})" for name, (limit, used) in self.exceeded.items()]
        return f"{self.scope} budget exceeded: " + ", ".join(parts)


def initial_limits(budget: Budget) -> BudgetLimits:
    """The limits a run starts from: the budget's own."""
    return BudgetLimits(max_tokens=budget.max_tokens, max_cost_usd=budget.max_cost_usd)


def budget_crossing(budget: Budget, limits: BudgetLimits, spent: Spend) -> BudgetCrossing | None:
    """The limits ``spent`` has reached (``>=``), or ``None`` while it is within all of them."""
    used: dict[LimitName, float] = {"max_tokens": spent.tokens, "max_cost_usd": spent.cost_usd}
    configured: dict[LimitName, float | None] = {"max_tokens": budget.max_tokens, "max_cost_usd": budget.max_cost_usd}
    exceeded: dict[str, tuple[float, float]] = {}
    raise_to: dict[str, float] = {}
    for name in ("max_tokens", "max_cost_usd"):
        limit, step = limits.get(name), configured[name]
        if limit is None or step is None or used[name] < limit:
            continue
        exceeded[name] = (limit, used[name])
        raise_to[name] = used[name] + step
    if not exceeded:
        return None
    return BudgetCrossing(scope=budget.scope, exceeded=exceeded, raise_to=raise_to)


def raised_limits(limits: BudgetLimits, raise_to: dict[str, Any]) -> BudgetLimits:
    """The limits after an approval: each named one raised to ``raise_to`` (never lowered)."""

    def pick(name: LimitName) -> float | None:
        current, new = limits.get(name), raise_to.get(name)
        if current is None or not isinstance(new, int | float):
            return current
        return max(current, float(new))

    return BudgetLimits(max_tokens=pick("max_tokens"), max_cost_usd=pick("max_cost_usd"))


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else str(int(value))
