"""Pure usage rollups and budget decisions (no database, no model)."""

from __future__ import annotations

import functools
import operator

import pytest

from helix_dbos.orchestration.budget import (
    BudgetLimits,
    Spend,
    budget_crossing,
    initial_limits,
    raised_limits,
)
from helix_dbos.store.base import UsageRecord
from helix_dbos.usage import Budget, UsageSummary, summarize_usage


def test_the_rollup_is_pure_and_keeps_failed_attempts_apart() -> None:
    summary = summarize_usage(
        [
            UsageRecord(kind="llm", name="m", step=1, input_tokens=10, output_tokens=2, value=5.0, cost_usd=0.5),
            UsageRecord(kind="llm", name="m", step=2, input_tokens=7, output_tokens=1, success=False, cost_usd=0.25),
            UsageRecord(kind="llm", name="m", step=3, input_tokens=1, output_tokens=1, value=1.0),
            UsageRecord(kind="tool", name="t", step=1, value=3.0),
            UsageRecord(kind="tool", name="t", step=1, value=4.0, success=False),
            UsageRecord(kind="client_tool_wait_ms", name="c", step=2, value=250.0),
        ]
    )
    assert summary == UsageSummary(
        input_tokens=11,
        output_tokens=3,
        total_tokens=14,
        cost_usd=0.5,
        unpriced_llm_calls=1,
        llm_calls=2,
        llm_duration_ms=6.0,
        tool_calls=2,
        failed_tool_calls=1,
        tool_duration_ms=7.0,
        client_tool_waits=1,
        client_tool_wait_ms=250.0,
        failed={"llm_calls": 1, "input_tokens": 7, "output_tokens": 1, "cost_usd": 0.25},
    )
    assert (summary.billed_tokens, summary.billed_cost_usd) == (22, 0.75)
    assert summarize_usage([]) == UsageSummary()


def test_the_rollup_gives_the_same_totals_in_any_order() -> None:
    # Plain float addition is not associative: 0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1. A run's rollup read
    # child by child must equal the session's read by time, to the last bit.
    values = [0.1, 0.2, 0.3]
    records = [
        UsageRecord(kind=kind, name="x", step=i, value=v, cost_usd=v / 1000)
        for i, v in enumerate(values)
        for kind in ("llm", "tool", "client_tool_wait_ms")
    ]
    forward, backward = summarize_usage(records), summarize_usage(list(reversed(records)))
    assert forward == backward
    assert functools.reduce(operator.add, values) != functools.reduce(operator.add, reversed(values))  # plain + differs


def test_a_budget_is_crossed_at_its_limit_and_an_approval_grants_one_more_budget() -> None:
    budget = Budget(max_tokens=100, max_cost_usd=1.0)
    limits = initial_limits(budget)
    assert budget_crossing(budget, limits, Spend(99, 0.5)) is None
    crossing = budget_crossing(budget, limits, Spend(130, 0.5))
    assert crossing is not None
    assert crossing.exceeded == {"max_tokens": (100, 130)}
    assert crossing.raise_to == {"max_tokens": 230}
    assert crossing.arguments() == {
        "scope": "run",
        "exceeded": {"max_tokens": {"limit": 100, "used": 130}},
        "raise_to": {"max_tokens": 230},
    }
    assert crossing.message() == "run budget exceeded: max_tokens 100 (used 130)"
    raised = raised_limits(limits, crossing.raise_to)
    assert raised == BudgetLimits(max_tokens=230, max_cost_usd=1.0)
    assert budget_crossing(budget, raised, Spend(229, 0.9)) is None
    both = budget_crossing(budget, raised, Spend(230, 1.5))
    assert both is not None and set(both.exceeded) == {"max_tokens", "max_cost_usd"}
    assert both.raise_to == {"max_tokens": 330, "max_cost_usd": 2.5}


def test_raising_never_lowers_and_ignores_what_is_not_a_number() -> None:
    limits = BudgetLimits(max_tokens=500, max_cost_usd=None)
    assert raised_limits(limits, {"max_tokens": 200, "max_cost_usd": 3.0}) == limits
    assert raised_limits(limits, {"max_tokens": "lots"}) == limits


def test_a_budget_needs_a_positive_limit() -> None:
    with pytest.raises(ValueError, match="max_tokens or max_cost_usd"):
        Budget()
    with pytest.raises(ValueError):
        Budget(max_tokens=0)
    with pytest.raises(ValueError):
        Budget(max_cost_usd=-1.0)
    assert Budget(max_cost_usd=0.5).scope == "run"


def test_cost_comes_from_litellms_cost_map_and_an_unknown_model_costs_none() -> None:
    litellm = pytest.importorskip("litellm")
    from helix_dbos.llm.litellm.cost import call_cost_usd

    usage = litellm.Usage(prompt_tokens=1000, completion_tokens=100, prompt_tokens_details={"cached_tokens": 400})
    info = litellm.model_cost["gpt-4o-mini"]
    expected = (
        600 * info["input_cost_per_token"]
        + 400 * info["cache_read_input_token_cost"]
        + 100 * info["output_cost_per_token"]
    )
    assert call_cost_usd(litellm, "openai/gpt-4o-mini", usage) == pytest.approx(expected)
    assert call_cost_usd(litellm, "openai/no-such-model", usage) is None
    assert call_cost_usd(litellm, "openai/gpt-4o-mini", None) is None
