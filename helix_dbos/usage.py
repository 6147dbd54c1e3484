"""What runs used and cost: :class:`UsageSummary` (the rollup) and :class:`Budget` (the limits).

Every LLM call, tool call and client wait of a run is a usage record, written with the step's
commit (``helix_dbos.store.base.UsageRecord``) and keyed by its place in that commit, so a replayed
or re-executed step can never count twice. :func:`summarize_usage` rolls any set of records up,
purely: the records of one run, of a session, or of a session with its sub-agents' sessions.

Failed-but-billed LLM attempts (the provider answered and charged, but the answer was unusable
and the call was retried, or the call ended in an error) are recorded with ``success=False``. They
are kept out of the success totals and shown apart under :attr:`UsageSummary.failed`; a budget
counts both, because both were paid for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Budget", "FailedUsage", "UsageRecordLike", "UsageSummary", "summarize_usage"]


class UsageRecordLike(Protocol):
    """The fields of a usage record a rollup reads (``helix_dbos.store.base.UsageRecord``)."""

    @property
    def kind(self) -> str: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cached_input_tokens(self) -> int: ...
    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def value(self) -> float | None: ...
    @property
    def success(self) -> bool: ...
    @property
    def cost_usd(self) -> float | None: ...


class FailedUsage(BaseModel):
    """LLM attempts that were billed but bought no step: not in the success totals, shown here."""

    model_config = ConfigDict(extra="forbid")

    llm_calls: int = 0
    """Failed attempts (an error after retries, or an attempt whose answer was unusable and retried)."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    """Cost of the failed attempts that could be priced."""


class UsageSummary(BaseModel):
    """Tokens, cost, calls and durations of a run or a session (with its sub-agents).

    Token and cost totals cover successful LLM calls; failed-but-billed attempts are in
    :attr:`failed` (so ``cost_usd + failed.cost_usd`` is what the provider charged, as far as the
    cost map knows).
    """

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    """Prompt tokens, cached ones included."""
    output_tokens: int = 0
    """Completion tokens, reasoning ones included."""
    cached_input_tokens: int = 0
    """Input tokens served from the provider's prompt cache (part of ``input_tokens``)."""
    reasoning_tokens: int = 0
    """Output tokens spent on reasoning (part of ``output_tokens``)."""
    total_tokens: int = 0
    """``input_tokens + output_tokens``."""
    cost_usd: float = 0.0
    """USD, from LiteLLM's cost map at the time of each call; exact only when ``unpriced_llm_calls``
    is 0 (a model the map does not know adds nothing here)."""
    unpriced_llm_calls: int = 0
    """Successful LLM calls whose model had no price in LiteLLM's cost map."""
    llm_calls: int = 0
    """Successful LLM calls (one per step; a re-executed step is still one)."""
    llm_duration_ms: float = 0.0
    """Time spent in successful LLM calls (retries within a call included)."""
    tool_calls: int = 0
    """Tool calls with a result, failed ones included."""
    failed_tool_calls: int = 0
    tool_duration_ms: float = 0.0
    """Time spent executing tools (summed over parallel calls, so it can exceed wall time)."""
    client_tool_waits: int = 0
    """Client-executed and approval-gated calls that were answered or timed out."""
    client_tool_wait_ms: float = 0.0
    """Time from each such call's durable registration to its durable answer."""
    failed: FailedUsage = Field(default_factory=FailedUsage)

    @property
    def billed_tokens(self) -> int:
        """Every token paid for: the totals plus the failed attempts' (what a :class:`Budget` counts)."""
        return self.total_tokens + self.failed.input_tokens + self.failed.output_tokens

    @property
    def billed_cost_usd(self) -> float:
        """Every priced dollar paid: ``cost_usd + failed.cost_usd`` (what a :class:`Budget` counts)."""
        return self.cost_usd + self.failed.cost_usd


def summarize_usage(records: Iterable[UsageRecordLike]) -> UsageSummary:
    """Roll usage records up into one :class:`UsageSummary` (pure: no I/O, any order).

    Dollars and milliseconds are summed with :func:`math.fsum`, which is exactly rounded: the
    same records give the same totals in any order (a run's rollup read child by child equals
    the session's read by time, to the last bit).
    """
    s = UsageSummary()
    failed = FailedUsage()
    sums: dict[str, list[float]] = {k: [] for k in ("cost", "failed_cost", "llm_ms", "tool_ms", "wait_ms")}
    for r in records:
        if r.kind == "llm":
            if not r.success:
                failed.llm_calls += 1
                failed.input_tokens += r.input_tokens
                failed.output_tokens += r.output_tokens
                sums["failed_cost"].append(r.cost_usd or 0.0)
                continue
            s.llm_calls += 1
            s.input_tokens += r.input_tokens
            s.output_tokens += r.output_tokens
            s.cached_input_tokens += r.cached_input_tokens
            s.reasoning_tokens += r.reasoning_tokens
            sums["llm_ms"].append(r.value or 0.0)
            if r.cost_usd is None:
                s.unpriced_llm_calls += 1
            else:
                sums["cost"].append(r.cost_usd)
        elif r.kind == "tool":
            s.tool_calls += 1
            s.failed_tool_calls += 0 if r.success else 1
            sums["tool_ms"].append(r.value or 0.0)
        elif r.kind == "client_tool_wait_ms":
            s.client_tool_waits += 1
            sums["wait_ms"].append(r.value or 0.0)
    s.cost_usd = math.fsum(sums["cost"])
    failed.cost_usd = math.fsum(sums["failed_cost"])
    s.llm_duration_ms = math.fsum(sums["llm_ms"])
    s.tool_duration_ms = math.fsum(sums["tool_ms"])
    s.client_tool_wait_ms = math.fsum(sums["wait_ms"])
    s.total_tokens = s.input_tokens + s.output_tokens
    s.failed = failed
    return s


class Budget(BaseModel):
    """Limits on what an agent's runs may spend; crossing one asks a human before going on.

    Give it to :func:`~helix_dbos.define_agent` (``budget=Budget(max_cost_usd=0.50)``). The loop
    checks it between steps, from the usage recorded so far (billed tokens and cost: failed
    attempts count too). When a limit is reached the run suspends on a pending call of kind
    ``budget``, announced like an approval (``tool_approval_request`` with ``tool_name="budget"``)
    and answered like one with ``submit_tool_result({"kind": "approval-response", ...})``:

    - approved: the run goes on, and the crossed limit is raised to *what was used at the crossing
      plus the limit* (one more budget's worth from there), recorded with the approval;
    - denied: the run ends ``failed`` with an error saying which limit and by how much.

    ``scope="run"`` counts the current run only (a continuation after a suspension is a new run,
    so it starts from zero: the same "one more budget's worth" an approval grants);
    ``scope="session"`` counts every run of the session, read once when a run starts.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(default=None, gt=0)
    """Billed tokens (input + output, failed attempts included)."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """Billed USD per LiteLLM's cost map (a model it cannot price adds nothing)."""
    scope: Literal["run", "session"] = "run"

    @model_validator(mode="after")
    def _some_limit(self) -> Budget:
        if self.max_tokens is None and self.max_cost_usd is None:
            raise ValueError("a Budget needs max_tokens or max_cost_usd")
        return self
