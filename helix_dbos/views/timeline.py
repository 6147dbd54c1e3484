"""A session's runs and their steps, with durations, tokens and cost: built from records, no I/O.

Where the figures come from:

- a run's steps are its checkpoints: step 0 is written when the run starts, step ``k`` when the
  iteration ``k`` (one LLM call and its tool calls) is committed, so a step's duration is the time
  between its checkpoint and the one before it (the run's start for step 0);
- a checkpoint belongs to the run in flight when it was written (a session runs one run at a time);
- tokens, tool durations and cost come from :mod:`helix_dbos.views.usage_view`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from helix_dbos._clock import iso_utc
from helix_dbos.checkpoint import CheckpointMeta
from helix_dbos.store.base import RunRecord
from helix_dbos.views.usage_view import StepUsage

__all__ = ["RunTimeline", "StepRow", "build_timeline", "totals"]


@dataclass
class StepRow:
    """One step of a run."""

    step: int
    checkpoint_id: str
    status: str
    committed_at: int
    duration_ms: int | None
    usage: StepUsage

    def to_json(self) -> dict[str, Any]:
        """The step with stable keys."""
        return {
            "step": self.step,
            "checkpoint_id": self.checkpoint_id,
            "status": self.status,
            "committed_at": iso_utc(self.committed_at),
            "committed_at_ms": self.committed_at,
            "duration_ms": self.duration_ms,
            **self.usage.to_json(),
        }


@dataclass
class RunTimeline:
    """One run and its steps, oldest first."""

    run: RunRecord
    steps: list[StepRow] = field(default_factory=list)

    @property
    def duration_ms(self) -> int | None:
        """Start to end; ``None`` while the run has not ended."""
        return None if self.run.completed_at is None else self.run.completed_at - self.run.started_at

    def to_json(self) -> dict[str, Any]:
        """The run with stable keys."""
        run = self.run
        return {
            "run_id": run.run_id,
            "turn": run.turn,
            "mode": run.mode,
            "status": run.status,
            "previous_run_id": run.previous_run_id,
            "started_at": iso_utc(run.started_at),
            "started_at_ms": run.started_at,
            "completed_at": iso_utc(run.completed_at),
            "completed_at_ms": run.completed_at,
            "duration_ms": self.duration_ms,
            "step_count": run.step_count,
            "error": run.error,
            "totals": totals([s.usage for s in self.steps]),
            "steps": [s.to_json() for s in self.steps],
        }


def build_timeline(
    runs: Sequence[RunRecord],
    checkpoints: Sequence[CheckpointMeta],
    usage: dict[str, dict[int, StepUsage]],
) -> list[RunTimeline]:
    """Each run with its steps: ``usage`` is by run id, then by step."""
    ordered = sorted(runs, key=lambda r: r.turn)
    timelines = [RunTimeline(run) for run in ordered]
    for checkpoint in sorted(checkpoints, key=lambda c: (c.timestamp, c.step_count)):
        owner = _owner(timelines, checkpoint.timestamp)
        if owner is not None:
            previous = owner.steps[-1].committed_at if owner.steps else owner.run.started_at
            owner.steps.append(
                StepRow(
                    step=checkpoint.step_count,
                    checkpoint_id=checkpoint.id,
                    status=checkpoint.status,
                    committed_at=checkpoint.timestamp,
                    duration_ms=max(checkpoint.timestamp - previous, 0),
                    usage=StepUsage(),
                )
            )
    for timeline in timelines:
        by_step = usage.get(timeline.run.run_id, {})
        for row in timeline.steps:
            row.usage = by_step.get(row.step, StepUsage())
        seen = {row.step for row in timeline.steps}
        for step in sorted(set(by_step) - seen):  # usage of a step whose checkpoint a retry dropped
            timeline.steps.append(StepRow(step, "", "discarded", timeline.run.started_at, None, by_step[step]))
    return timelines


def _owner(timelines: list[RunTimeline], at_ms: int) -> RunTimeline | None:
    """The run that was in flight at ``at_ms``: the last one started at or before it.

    ``None`` before the first run: a fork's checkpoint at its branch point belongs to no run of its own.
    """
    owner: RunTimeline | None = None
    for timeline in timelines:
        if timeline.run.started_at <= at_ms:
            owner = timeline
    return owner


def totals(steps: Sequence[StepUsage]) -> dict[str, Any]:
    """Tokens, cost and call counts summed over ``steps`` (cost ``None`` when any LLM call is unpriced)."""
    llm_calls = sum(s.llm_calls for s in steps)
    priced = [s.cost_usd for s in steps if s.llm_calls]
    return {
        "input_tokens": sum(s.input_tokens for s in steps),
        "output_tokens": sum(s.output_tokens for s in steps),
        "cached_input_tokens": sum(s.cached_input_tokens for s in steps),
        "reasoning_tokens": sum(s.reasoning_tokens for s in steps),
        "cost_usd": None if any(c is None for c in priced) else sum(c for c in priced if c is not None),
        "llm_calls": llm_calls,
        "tool_calls": sum(len(s.tool_calls) for s in steps),
    }
