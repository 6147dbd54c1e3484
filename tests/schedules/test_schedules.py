"""Agent schedules in one process on PostgreSQL: fires, pause, backfill, a session still running, bad input.

Real DBOS (its scheduler thread and internal queue), the real LiteLLM client against the scripted
server. Fires are counted by their ids (one DBOS workflow per fire time) and runs by their session
and run ids, so a double fire or a second run of one fire would show.
"""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta

import pytest

from helix_dbos import AgentSchedule
from helix_dbos.errors import (
    AgentNotFoundError,
    InvalidScheduleError,
    ScheduleExistsError,
    ScheduleNotFoundError,
)
from helix_dbos.runtime.schedules import ScheduleFire
from helix_dbos.testing import ScriptedOpenAIServer, ScriptedResponse
from tests.schedules.conftest import Scheduled

pytestmark = pytest.mark.postgres


def _every_second(name: str, **extra: object) -> AgentSchedule:
    return AgentSchedule.model_validate(
        {"name": name, "agent": "reporter", "cron": "* * * * * *", "message": "Report.", **extra}
    )


def _started(fires: list[ScheduleFire]) -> list[ScheduleFire]:
    return [f for f in fires if f.outcome is not None and f.outcome.status == "started"]


def _wait_runs_finished(scheduled: Scheduled, fires: list[ScheduleFire], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    store = scheduled.executor.store
    for fire in _started(fires):
        assert fire.outcome is not None
        while (session := store.load_session(fire.outcome.session_id)) is None or session.status == "active":
            assert time.monotonic() < deadline, f"run of {fire.fire_id} not finished"
            time.sleep(0.1)


def test_a_schedule_fires_once_per_second_each_fire_one_run(scheduled: Scheduled) -> None:
    scheduled.executor.schedules.create(_every_second("each-second"))
    scheduled.wait_fires("each-second", 3)
    fires = scheduled.settle("each-second")
    started = _started(fires)
    assert len(started) == len(fires)  # a new session per fire: nothing to skip
    times = sorted(datetime.fromisoformat(f.fire_time) for f in fires)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(gap == timedelta(seconds=1) for gap in gaps), [t.isoformat() for t in times]
    sessions = [f.outcome.session_id for f in started if f.outcome]
    assert len(set(sessions)) == len(sessions)
    assert all(s.startswith("schedule-each-second-") for s in sessions)
    _wait_runs_finished(scheduled, fires)
    for session_id in sessions:
        runs = scheduled.executor.list_runs(session_id)
        assert [r.status for r in runs] == ["completed"]  # exactly one run per fire


def test_pause_stops_firing_and_resume_does_not_catch_up_the_pause(scheduled: Scheduled) -> None:
    book = scheduled.executor.schedules
    book.create(_every_second("pausable"))
    scheduled.wait_fires("pausable", 2)
    assert book.pause("pausable").status == "paused"
    time.sleep(2.0)  # the scheduler sees the pause within its 1 s poll; a fire already due may land
    paused = {f.fire_id for f in book.fires("pausable", limit=1000)}
    paused_at = datetime.now(UTC)
    time.sleep(3.0)
    assert {f.fire_id for f in book.fires("pausable", limit=1000)} == paused
    resumed_at = datetime.now(UTC)
    assert book.resume("pausable").status == "active"
    fires = scheduled.wait_fires("pausable", len(paused) + 2)
    new = [f for f in fires if f.fire_id not in paused]
    # Nothing of the paused window was run on resume: every new fire is after the resume.
    assert all(datetime.fromisoformat(f.fire_time) > resumed_at - timedelta(seconds=1) for f in new), (
        paused_at,
        resumed_at,
        [f.fire_time for f in new],
    )
    _wait_runs_finished(scheduled, fires)


def test_backfill_runs_each_missed_fire_once_and_a_second_backfill_adds_nothing(scheduled: Scheduled) -> None:
    book = scheduled.executor.schedules
    book.create(AgentSchedule(name="minutely", agent="reporter", cron="* * * * *", message="Report.", enabled=False))
    end = datetime.now(UTC)
    start = end - timedelta(minutes=5, seconds=30)
    first = book.backfill("minutely", start, end)
    assert len(first.enqueued) in (5, 6) and first.already_fired == []
    assert all(f.fire_id.startswith("sched-minutely-") for f in first.fires)
    fires = scheduled.wait_fires("minutely", len(first.enqueued))
    _wait_runs_finished(scheduled, fires)
    second = book.backfill("minutely", start, end)
    assert second.enqueued == [] and sorted(second.already_fired) == sorted(first.enqueued)
    time.sleep(1.5)
    after = book.fires("minutely", limit=1000)
    assert len(after) == len(first.enqueued)
    sessions = [f.outcome.session_id for f in after if f.outcome]
    assert len(set(sessions)) == len(after)
    for session_id in sessions:
        assert len(scheduled.executor.list_runs(session_id)) == 1


def test_a_session_schedule_skips_and_records_a_fire_while_its_run_is_in_flight(
    scheduled: Scheduled, llm: ScriptedOpenAIServer
) -> None:
    llm.add(ScriptedResponse(text="slow", delay_seconds=2.5))  # the first run outlasts two fire times
    book = scheduled.executor.schedules
    book.create(_every_second("one-session", session_id="scheduled-conversation"))
    scheduled.wait_fires("one-session", 5)
    fires = scheduled.settle("one-session")
    oldest_first = sorted(fires, key=lambda f: f.fire_time)
    statuses = [f.outcome.status for f in oldest_first if f.outcome]
    assert statuses[0] == "started" and "skipped" in statuses, statuses
    skipped = [f.outcome for f in oldest_first if f.outcome and f.outcome.status == "skipped"]
    assert all(o.code == "state_already_running" for o in skipped)
    _wait_runs_finished(scheduled, fires)
    started = _started(fires)
    runs = scheduled.executor.list_runs("scheduled-conversation")
    assert sorted(r.run_id for r in runs) == sorted(f.outcome.run_id for f in started if f.outcome and f.outcome.run_id)
    assert [r.turn for r in sorted(runs, key=lambda r: r.turn)] == list(range(1, len(started) + 1))


def test_bad_input_is_refused_with_typed_errors(scheduled: Scheduled) -> None:
    book = scheduled.executor.schedules
    with pytest.raises(InvalidScheduleError) as bad_cron:
        book.create(AgentSchedule(name="bad", agent="reporter", cron="61 * * * *", message="x"))
    assert bad_cron.value.code == "validation_invalid_schedule" and bad_cron.value.field == "cron"
    with pytest.raises(InvalidScheduleError) as bad_zone:
        book.create(AgentSchedule(name="bad", agent="reporter", cron="0 * * * *", message="x", timezone="Mars/Base"))
    assert bad_zone.value.field == "timezone"
    with pytest.raises(AgentNotFoundError):
        book.create(AgentSchedule(name="bad", agent="nobody", cron="0 * * * *", message="x"))
    assert [i.schedule.name for i in book.list()] == []  # nothing was stored by the refusals
    book.create(AgentSchedule(name="daily", agent="reporter", cron="0 3 * * *", message="x"))
    with pytest.raises(ScheduleExistsError):
        book.create(AgentSchedule(name="daily", agent="reporter", cron="0 4 * * *", message="y"))
    assert book.get("daily").schedule.cron == "0 3 * * *"
    for call in (book.get, book.pause, book.resume, book.delete, book.fires):
        with pytest.raises(ScheduleNotFoundError) as missing:
            call("nope")
        assert missing.value.code == "state_schedule_not_found"
    now = datetime.now(UTC)
    with pytest.raises(InvalidScheduleError):
        book.backfill("daily", now, now - timedelta(days=1))
    with pytest.raises(InvalidScheduleError):
        book.backfill("daily", now - timedelta(days=1001), now)  # more than 1000 fire times
    assert book.fires("daily") == []
