"""The retention planner: given sessions, their runs, a policy and the time, what to delete (pure).

No database, no clock: :func:`plan_retention` is a function of its arguments, so every rule below
is tested on plain values and the executor (:mod:`helix_dbos.retention.executor`) only carries the
plan out.

Rules, in order:

1. **Live families are untouched.** Sessions are grouped by family (``root_session_id``, else
   their own id: a parent, its sub-agents and companions). A family is *live* when any of its
   sessions is ``active`` (a run in flight, queued, or parked on a human or on children) or any of
   its runs is ``running`` or ``suspended``. Nothing of a live family is planned, so a parked run,
   its stream, and a companion's live session never lose a row.
2. **A run is past the policy** when it is past any limit that applies to its session's agent
   (:class:`~helix_dbos.retention.policy.RetentionRules`): older than its age limit (by
   ``completed_at``, else ``started_at``), or beyond the session's last ``keep_last_runs`` runs.
3. **A session whose every run is past the policy is deleted whole** (a session that never ran
   goes when its ``updated_at`` is past ``keep_days``).
4. **Otherwise the session lives on, and its latest run stays** whatever its age: it is what a
   continuation reads (its turn, its stream position, the batch it suspended on). Only older runs
   past the policy go, and with them their run-scoped rows - never the transcript, which is the
   session's: a session that lives on keeps every message, so the model sees the same conversation
   next turn and ``message_count`` stays true.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from helix_dbos.retention.policy import DAY_MS, RetentionPolicy, RetentionRules

__all__ = [
    "LIVE_RUN_STATUSES",
    "RetentionPlan",
    "RunExpiry",
    "RunFacts",
    "SessionExpiry",
    "SessionFacts",
    "plan_retention",
]

LIVE_RUN_STATUSES: frozenset[str] = frozenset({"running", "suspended"})
"""Run statuses of a run that goes on: in flight (or queued), or parked until an answer or a child."""


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SessionFacts(_Facts):
    """What the planner needs of a session row."""

    session_id: str
    agent_type: str
    status: str
    """The stored status: ``active`` means a run is in flight or parked."""
    version: int
    """Bumped by every run start: the executor deletes a session only while it is still at this version."""
    stream_id: str
    root_session_id: str | None = None
    updated_at: int
    """Epoch milliseconds."""

    @property
    def family(self) -> str:
        """The id of the session tree this session belongs to."""
        return self.root_session_id or self.session_id


class RunFacts(_Facts):
    """What the planner needs of a run row."""

    run_id: str
    session_id: str
    turn: int
    status: str
    started_at: int
    completed_at: int | None = None
    workflow_id: str

    @property
    def ended_at(self) -> int:
        """When the run ended, else when it started (epoch milliseconds): the age a policy measures."""
        return self.completed_at if self.completed_at is not None else self.started_at


class SessionExpiry(_Facts):
    """A session to delete whole: its rows, its stream, and its runs' DBOS workflows."""

    session_id: str
    version: int
    stream_id: str
    workflow_ids: list[str]


class RunExpiry(_Facts):
    """A run to delete from a session that lives on: its run-scoped rows and DBOS workflows, not its messages."""

    session_id: str
    run_id: str
    workflow_id: str
    stream_id: str


class RetentionPlan(_Facts):
    """What one garbage collection deletes, and what it left alone because it is live."""

    sessions: list[SessionExpiry]
    runs: list[RunExpiry]
    live_sessions_kept: int
    """Sessions of live families, not looked at (however old their other runs)."""

    @property
    def is_empty(self) -> bool:
        """Whether nothing is to be deleted."""
        return not self.sessions and not self.runs


def plan_retention(
    sessions: Iterable[SessionFacts],
    runs: Iterable[RunFacts],
    policy: RetentionPolicy,
    *,
    now_ms: int,
    live_families: Iterable[str] = (),
) -> RetentionPlan:
    """Decide what to delete (the module docstring's rules).

    ``sessions`` and ``runs`` may be a page of the database (every run of each session given);
    ``live_families`` names families known live from outside the page (a family is also live when
    one of the given sessions or runs makes it so).
    """
    session_list = list(sessions)
    runs_by_session: dict[str, list[RunFacts]] = defaultdict(list)
    for run in runs:
        runs_by_session[run.session_id].append(run)
    live = set(live_families)
    for session in session_list:
        session_runs = runs_by_session[session.session_id]
        if session.status == "active" or any(r.status in LIVE_RUN_STATUSES for r in session_runs):
            live.add(session.family)

    whole: list[SessionExpiry] = []
    partial: list[RunExpiry] = []
    live_kept = 0
    for session in session_list:
        if session.family in live:
            live_kept += 1
            continue
        session_runs = sorted(runs_by_session[session.session_id], key=lambda r: r.turn)
        rules = policy.rules_for(session.agent_type)
        expired = [r for r in session_runs if _past_policy(r, session_runs, rules, now_ms)]
        if not session_runs:
            if rules.keep_days is not None and session.updated_at < now_ms - rules.keep_days * DAY_MS:
                whole.append(_whole(session, []))
            continue
        if len(expired) == len(session_runs):
            whole.append(_whole(session, session_runs))
            continue
        latest = session_runs[-1].run_id
        partial.extend(
            RunExpiry(
                session_id=session.session_id, run_id=r.run_id, workflow_id=r.workflow_id, stream_id=session.stream_id
            )
            for r in expired
            if r.run_id != latest
        )
    return RetentionPlan(sessions=whole, runs=partial, live_sessions_kept=live_kept)


def _past_policy(run: RunFacts, session_runs: list[RunFacts], rules: RetentionRules, now_ms: int) -> bool:
    """Whether ``run`` is past an age limit or beyond the last ``keep_last_runs`` of ``session_runs`` (by turn)."""
    limit_days = rules.age_limit_days(run.status)
    if limit_days is not None and run.ended_at < now_ms - limit_days * DAY_MS:
        return True
    if rules.keep_last_runs is not None:
        newer = sum(1 for other in session_runs if other.turn > run.turn)
        if newer >= rules.keep_last_runs:
            return True
    return False


def _whole(session: SessionFacts, session_runs: list[RunFacts]) -> SessionExpiry:
    return SessionExpiry(
        session_id=session.session_id,
        version=session.version,
        stream_id=session.stream_id,
        workflow_ids=[r.workflow_id for r in session_runs],
    )
