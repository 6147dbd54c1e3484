"""The retention planner's rules on plain values (pure: no database, no clock)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from helix_dbos.retention import RetentionPolicy, RetentionPolicyError, RetentionRules, RunFacts, SessionFacts
from helix_dbos.retention import plan_retention as plan

DAY = 86_400_000
NOW = 1_000 * DAY


def session(sid: str, *, status: str = "completed", agent: str = "a", root: str | None = None) -> SessionFacts:
    return SessionFacts(
        session_id=sid, agent_type=agent, status=status, version=3, stream_id=sid, root_session_id=root, updated_at=NOW
    )


def run(sid: str, turn: int, *, age_days: float, status: str = "completed") -> RunFacts:
    ended = NOW - int(age_days * DAY)
    return RunFacts(
        run_id=f"{sid}-r{turn}",
        session_id=sid,
        turn=turn,
        status=status,
        started_at=ended - 1000,
        completed_at=None if status in ("running", "suspended") else ended,
        workflow_id=f"{sid}-turn-{turn}",
    )


def test_a_session_whose_every_run_is_old_goes_whole_with_its_workflows() -> None:
    result = plan(
        [session("s")], [run("s", 1, age_days=10), run("s", 2, age_days=9)], RetentionPolicy(keep_days=7), now_ms=NOW
    )
    assert [(s.session_id, s.workflow_ids) for s in result.sessions] == [("s", ["s-turn-1", "s-turn-2"])]
    assert result.runs == []


def test_a_session_that_lives_on_loses_only_its_old_runs() -> None:
    runs = [run("s", 1, age_days=10), run("s", 2, age_days=8), run("s", 3, age_days=1)]
    result = plan([session("s")], runs, RetentionPolicy(keep_days=7), now_ms=NOW)
    assert result.sessions == [] and [r.run_id for r in result.runs] == ["s-r1", "s-r2"]


def test_keep_last_caps_the_runs_of_a_session_and_never_deletes_it_whole() -> None:
    runs = [run("s", t, age_days=100 - t) for t in range(1, 6)]
    result = plan([session("s")], runs, RetentionPolicy(keep_last_runs=2), now_ms=NOW)
    assert result.sessions == [] and [r.run_id for r in result.runs] == ["s-r1", "s-r2", "s-r3"]


def test_the_latest_run_stays_while_the_session_does() -> None:
    """A failed run kept longer keeps the session, so its latest (completed, old) run stays too."""
    runs = [run("s", 1, age_days=12, status="failed"), run("s", 2, age_days=10)]
    result = plan([session("s")], runs, RetentionPolicy(keep_days=7, keep_failed_days=30), now_ms=NOW)
    assert result.sessions == [] and result.runs == []


def test_failed_runs_are_kept_longer_and_then_go() -> None:
    policy = RetentionPolicy(keep_days=7, keep_failed_days=30)
    kept = plan([session("s", status="failed")], [run("s", 1, age_days=10, status="failed")], policy, now_ms=NOW)
    gone = plan([session("s", status="failed")], [run("s", 1, age_days=31, status="failed")], policy, now_ms=NOW)
    assert kept.is_empty and [s.session_id for s in gone.sessions] == ["s"]


@pytest.mark.parametrize(
    ("status", "run_status"), [("active", "running"), ("active", "suspended"), ("completed", "suspended")]
)
def test_a_live_family_is_untouched_however_old(status: str, run_status: str) -> None:
    sessions = [session("p"), session("c", status=status, root="p")]
    runs = [run("p", 1, age_days=100), run("p", 2, age_days=99), run("c", 1, age_days=100, status=run_status)]
    result = plan(sessions, runs, RetentionPolicy(keep_days=1, keep_last_runs=1), now_ms=NOW)
    assert result.is_empty and result.live_sessions_kept == 2


def test_a_family_live_on_another_page_is_untouched() -> None:
    result = plan(
        [session("c", root="p")],
        [run("c", 1, age_days=50)],
        RetentionPolicy(keep_days=1),
        now_ms=NOW,
        live_families=["p"],
    )
    assert result.is_empty


def test_a_session_that_never_ran_goes_by_its_last_update() -> None:
    stale = session("s").model_copy(update={"updated_at": NOW - 9 * DAY})
    assert [s.session_id for s in plan([stale], [], RetentionPolicy(keep_days=7), now_ms=NOW).sessions] == ["s"]
    assert plan([stale], [], RetentionPolicy(keep_last_runs=1), now_ms=NOW).is_empty


def test_per_agent_overrides_replace_only_what_they_set() -> None:
    policy = RetentionPolicy(keep_days=7, keep_last_runs=3, agents={"support": RetentionRules(keep_days=90)})
    assert policy.rules_for("support") == RetentionRules(keep_days=90, keep_last_runs=3)
    assert policy.rules_for("other") == RetentionRules(keep_days=7, keep_last_runs=3)
    result = plan(
        [session("x", agent="support"), session("y", agent="other")],
        [run("x", 1, age_days=10), run("y", 1, age_days=10)],
        policy,
        now_ms=NOW,
    )
    assert [s.session_id for s in result.sessions] == ["y"]


def test_a_policy_without_a_limit_is_refused_and_bad_limits_are_typed_errors() -> None:
    with pytest.raises(RetentionPolicyError) as caught:
        RetentionPolicy().require_a_limit()
    assert caught.value.code == "validation_error"
    RetentionPolicy(agents={"a": RetentionRules(keep_days=1)}).require_a_limit()  # an override is a limit
    with pytest.raises(ValidationError):
        RetentionPolicy(keep_last_runs=0)
    with pytest.raises(ValidationError):
        RetentionPolicy(keep_days=-1)
