"""The pure half of agent schedules: the ids a fire derives, and what a schedule or window must be."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from helix_dbos import AgentSchedule
from helix_dbos.errors import InvalidScheduleError
from helix_dbos.runtime.schedules.model import (
    check_schedule,
    fire_idempotency_key,
    fire_session_id,
    fire_time_of,
    fire_times,
)

FIRE = datetime(2026, 11, 27, 5, 0, 1, tzinfo=UTC)


def _schedule(**extra: object) -> AgentSchedule:
    return AgentSchedule.model_validate({"name": "daily", "agent": "a", "cron": "* * * * * *", "message": "m", **extra})


def test_a_fire_derives_its_session_and_key_from_the_schedule_name_and_fire_time_only() -> None:
    assert fire_session_id(_schedule(), FIRE) == "schedule-daily-20261127T050001Z"
    # The same instant in another zone is the same fire.
    paris = FIRE.astimezone(timezone(timedelta(hours=1)))
    assert fire_session_id(_schedule(), paris) == fire_session_id(_schedule(), FIRE)
    key = fire_idempotency_key("daily", FIRE)
    assert fire_idempotency_key("daily", paris) == key == "schedule:daily:20261127T050001Z"
    assert fire_idempotency_key("daily", FIRE + timedelta(seconds=1)) != fire_idempotency_key("daily", FIRE)
    assert fire_session_id(_schedule(session_id="conversation"), FIRE) == "conversation"


def test_the_fire_time_is_read_back_from_dbos_fire_ids() -> None:
    assert fire_time_of("sched-my-daily-2026-11-27T05:00:01+00:00") == "2026-11-27T05:00:01+00:00"


@pytest.mark.parametrize("cron", ["61 * * * *", "* * *", "not a cron", "* * * * * * * *"])
def test_a_cron_dbos_would_not_run_is_refused(cron: str) -> None:
    with pytest.raises(InvalidScheduleError) as refused:
        check_schedule(_schedule(cron=cron))
    assert refused.value.code == "validation_invalid_schedule" and refused.value.field == "cron"


def test_five_and_six_field_crons_and_a_known_zone_are_accepted() -> None:
    for cron in ("0 3 * * *", "*/10 * * * * *", "0 9 * * mon-fri"):
        check_schedule(_schedule(cron=cron, timezone="Europe/Paris"))
    with pytest.raises(InvalidScheduleError) as refused:
        check_schedule(_schedule(timezone="Mars/Base"))
    assert refused.value.field == "timezone"


def test_names_must_be_id_safe() -> None:
    for name in ("has space", "-leading", "x" * 101, "a/b"):
        with pytest.raises(ValidationError):
            _schedule(name=name)


def test_a_backfill_window_is_its_fire_times_strictly_inside_and_bounded() -> None:
    start = datetime(2026, 11, 27, 5, 0, 0, tzinfo=UTC)
    times = fire_times(_schedule(), start, start + timedelta(seconds=5))
    assert times == [start + timedelta(seconds=s) for s in range(1, 5)]
    with pytest.raises(InvalidScheduleError):
        fire_times(_schedule(), start, start)
    with pytest.raises(InvalidScheduleError):
        fire_times(_schedule(), start, start + timedelta(hours=1))  # 3599 fire times
