"""Tokens, tool durations and cost per step, as the CLI and the inspector show them: the one place that reads usage.

The usage rows (``SessionStore.get_usage``) are one per LLM call and per tool call, keyed by run and
step, and written once per step commit, so summing them never double counts. A call's cost is the
one recorded with it (LiteLLM's cost map when the call was made); a call recorded without one (an
adapter that does not price, rows older than cost recording) is priced from LiteLLM's local cost map
file when it knows the model, otherwise it is ``None`` (shown as ``-``), never a guess.

Failed-but-billed LLM attempts are kept apart (``failed_*``), as ``helix_dbos.usage.UsageSummary``
keeps them: the step's tokens and cost are those of the call that bought it. The whole session's
rollup, sub-agents included, is ``UsageSummary`` itself (:func:`session_usage`), the one
``GET /v1/sessions/{id}`` returns.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_dbos.store.base import SessionStore, UsageRecord
from helix_dbos.store.usage_tree import usage_with_children
from helix_dbos.usage import UsageSummary, summarize_usage

__all__ = ["StepUsage", "ToolCallUsage", "llm_cost_usd", "run_usage", "session_usage", "summarise", "usage_by_step"]


@dataclass
class ToolCallUsage:
    """One tool call of a step."""

    name: str
    duration_ms: float | None
    success: bool


@dataclass
class StepUsage:
    """What one step (one LLM call and the tool calls it asked for) used."""

    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    llm_calls: int = 0
    """Successful LLM calls (one per step)."""
    failed_llm_calls: int = 0
    """Billed attempts that bought no step: their tokens are the ``failed_*`` ones, not the above."""
    failed_input_tokens: int = 0
    failed_output_tokens: int = 0
    tool_calls: list[ToolCallUsage] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The step's usage with stable keys."""
        return {
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": self.cost_usd,
            "llm_calls": self.llm_calls,
            "failed_llm_calls": self.failed_llm_calls,
            "failed_input_tokens": self.failed_input_tokens,
            "failed_output_tokens": self.failed_output_tokens,
            "tool_calls": [
                {"name": t.name, "duration_ms": t.duration_ms, "success": t.success} for t in self.tool_calls
            ],
        }


def usage_by_step(store: SessionStore, session_id: str, run_id: str) -> dict[int, StepUsage]:
    """The run's usage, by step number (steps without usage are absent)."""
    return summarise(store.get_usage(session_id, run_id=run_id))


def run_usage(store: SessionStore, session_id: str, run_id: str) -> UsageSummary:
    """One run's rollup with the sub-agents it started, as ``AgentResult.usage`` and ``handle.usage()`` report it."""
    return summarize_usage(usage_with_children(store, session_id, run_id=run_id))


def session_usage(store: SessionStore, session_id: str) -> UsageSummary:
    """The session's rollup with its sub-agents' sessions, as ``GET /v1/sessions/{id}`` reports it."""
    return summarize_usage(store.get_usage(session_id, include_children=True))


def summarise(records: Iterable[UsageRecord]) -> dict[int, StepUsage]:
    """Fold usage rows into one :class:`StepUsage` per step (pure)."""
    steps: dict[int, StepUsage] = {}
    for record in records:
        step = steps.setdefault(record.step, StepUsage())
        if record.kind == "llm" and not record.success:
            step.failed_llm_calls += 1
            step.failed_input_tokens += record.input_tokens
            step.failed_output_tokens += record.output_tokens
        elif record.kind == "llm":
            step.model = record.name
            step.llm_calls += 1
            step.input_tokens += record.input_tokens
            step.output_tokens += record.output_tokens
            step.cached_input_tokens += record.cached_input_tokens
            step.reasoning_tokens += record.reasoning_tokens
            cost = record.cost_usd if record.cost_usd is not None else llm_cost_usd(record)
            if cost is not None:
                step.cost_usd = (step.cost_usd or 0.0) + cost
        elif record.kind == "tool":
            step.tool_calls.append(ToolCallUsage(record.name, record.value, record.success))
    return steps


def llm_cost_usd(record: UsageRecord) -> float | None:
    """The USD cost of one LLM call from LiteLLM's local cost map, or ``None`` when it is not known.

    The map is read as the JSON file LiteLLM ships (``model_prices_and_context_window_backup.json``),
    not by importing LiteLLM: the import costs seconds of CPU, too much for a listing. Cached input
    tokens are priced at the model's cache-read price where it has one.
    """
    if record.name.startswith("helix/"):  # the built-in scripted models cost nothing and are not in the map
        return 0.0
    prices = _cost_map().get(record.name) or _cost_map().get(record.name.partition("/")[2])
    if not isinstance(prices, dict) or "input_cost_per_token" not in prices:
        return None
    input_price = float(prices["input_cost_per_token"])
    cached_price = float(prices.get("cache_read_input_token_cost", input_price))
    output_price = float(prices.get("output_cost_per_token", 0.0))
    cached = min(record.cached_input_tokens, record.input_tokens)
    return (record.input_tokens - cached) * input_price + cached * cached_price + record.output_tokens * output_price


@functools.cache
def _cost_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return {}
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}
