"""What to keep: :class:`RetentionRules` (the three limits) and :class:`RetentionPolicy` (global + per agent).

A policy only *limits* what is kept; every limit left unset keeps everything it governs:

- ``keep_days``: a finished run older than this (by its end, else its start) is past the policy.
- ``keep_failed_days``: the same for a ``failed`` run, instead of ``keep_days`` (keep failures
  longer, to debug them); unset, failed runs follow ``keep_days``.
- ``keep_last_runs``: a session keeps at most its last K runs (by turn); older ones are past it.

A run is past the policy when it is past *any* limit that applies to it. What that means for a
session (the latest run always stays while the session does, a session whose every run is past
the policy goes whole) is the planner's (:mod:`helix_dbos.retention.planner`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.errors import HelixError

__all__ = ["RetentionPolicy", "RetentionPolicyError", "RetentionRules"]

DAY_MS = 86_400_000
"""Milliseconds in a day: the policy speaks days, rows carry epoch milliseconds."""


class RetentionPolicyError(HelixError, ValueError):
    """A garbage collection was asked for without any limit: it would keep everything, so it is refused.

    ``gc`` with no limit is almost always a forgotten flag; refusing says so instead of reporting
    zero rows deleted.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, code="validation_error")


class RetentionRules(BaseModel):
    """The limits of one retention policy (all optional; unset keeps what it governs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keep_days: float | None = Field(default=None, ge=0)
    """Finished runs older than this many days (by ``completed_at``, else ``started_at``) are past the policy."""
    keep_failed_days: float | None = Field(default=None, ge=0)
    """Failed runs older than this many days are past the policy (replaces ``keep_days`` for them)."""
    keep_last_runs: int | None = Field(default=None, ge=1)
    """Each session keeps at most its last K runs (by turn); at least 1, so a session can always continue."""

    @property
    def is_empty(self) -> bool:
        """Whether no limit is set (such rules keep everything)."""
        return self.keep_days is None and self.keep_failed_days is None and self.keep_last_runs is None

    def age_limit_days(self, run_status: str) -> float | None:
        """The age limit that applies to a run in ``run_status`` (``None``: no age limit)."""
        if run_status == "failed" and self.keep_failed_days is not None:
            return self.keep_failed_days
        return self.keep_days


class RetentionPolicy(RetentionRules):
    """Global limits, and per-agent overrides keyed by agent name.

    An override replaces only the limits it sets: ``agents={"support": RetentionRules(keep_days=90)}``
    keeps the support agent's runs 90 days and leaves its ``keep_last_runs`` the global one.
    """

    agents: dict[str, RetentionRules] = Field(default_factory=dict)
    """Per-agent overrides; the limits an override leaves unset fall back to the global ones."""

    @property
    def is_empty(self) -> bool:
        """Whether neither the global limits nor any override set a limit."""
        return super().is_empty and all(rules.is_empty for rules in self.agents.values())

    def rules_for(self, agent_type: str) -> RetentionRules:
        """The limits for sessions of ``agent_type``: its override's set fields over the global ones."""
        override = self.agents.get(agent_type)
        base = RetentionRules(
            keep_days=self.keep_days, keep_failed_days=self.keep_failed_days, keep_last_runs=self.keep_last_runs
        )
        if override is None:
            return base
        return base.model_copy(update={name: getattr(override, name) for name in override.model_fields_set})

    def require_a_limit(self) -> None:
        """Raise :class:`RetentionPolicyError` unless some limit is set."""
        if self.is_empty:
            raise RetentionPolicyError(
                "the retention policy sets no limit, so nothing would be deleted: "
                "give keep_days, keep_failed_days or keep_last_runs (globally or for an agent)"
            )
