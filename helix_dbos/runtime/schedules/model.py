"""What a scheduled agent is, and the ids its fires derive: pure data and pure functions.

A schedule is stored as a DBOS dynamic schedule (``DBOS.create_schedule``) whose workflow is the
fire workflow (:mod:`.fire`) and whose context is :class:`AgentSchedule` as JSON. DBOS fires it
under the workflow id ``sched-{name}-{fire time ISO}``, one per fire time, so a fire time
enqueued twice (two workers, a restart, a backfill) is one workflow. The agent run a fire starts
has an id derived from the same two things (:func:`fire_session_id`, :func:`fire_idempotency_key`),
so even a fire workflow that runs again finds its run instead of starting a second one.

The formats here are a contract with every fire already recorded: changing one makes a repeated
fire start a second run.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.errors import InvalidScheduleError

__all__ = [
    "FIRE_WORKFLOW_NAME",
    "SCHEDULE_NAME_PATTERN",
    "AgentSchedule",
    "FireOutcome",
    "MissedFires",
    "ScheduleFire",
    "ScheduleInfo",
    "check_schedule",
    "fire_idempotency_key",
    "fire_session_id",
    "fire_stamp",
    "fire_time_of",
    "fire_times",
]

FIRE_WORKFLOW_NAME = "helix.schedule.fire"
"""The DBOS workflow every agent schedule fires (a persisted name: fires recorded under it recover by it)."""

SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
"""Schedule names: they become part of workflow and session ids, so only id-safe characters."""

MissedFires = Literal["run_each", "skip"]
"""What happens to fire times that passed while no worker was running (see :attr:`AgentSchedule.missed_fires`)."""

_MAX_BACKFILL_FIRES = 1000


class AgentSchedule(BaseModel):
    """A cron schedule that starts an agent run with a given input at each fire time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SCHEDULE_NAME_PATTERN)
    """Unique name; part of every fire's workflow id and (for a new session per fire) session id."""
    agent: str = Field(min_length=1, max_length=200)
    """The registered agent each fire runs."""
    cron: str = Field(min_length=1, max_length=200)
    """A cron expression: 5 fields (minute resolution) or 6 with seconds first (``*/1 * * * * *``)."""
    message: str = Field(min_length=1)
    """The user message each fire's run starts with."""
    state: dict[str, Any] | None = None
    """Custom state overrides for a new session (ignored when continuing a session that exists)."""
    session_id: str | None = Field(default=None, min_length=1, max_length=200)
    """Continue this session at every fire (one turn per fire); ``None``: a new session per fire."""
    timezone: str | None = None
    """IANA time zone the cron expression is read in (``Europe/Paris``); ``None``: UTC."""
    missed_fires: MissedFires = "run_each"
    """Fire times that passed while no worker ran: ``run_each`` runs each of them once when a
    worker starts again (DBOS's automatic backfill from the last fire); ``skip`` drops them."""
    enabled: bool = True
    """``False`` creates the schedule paused."""
    tenant: str | None = Field(default=None, min_length=1, max_length=200)
    """The tenant whose sessions the fires run in (``None``: the default tenant). Over HTTP it is the
    caller's, and a schedule of another tenant is not found."""


class ScheduleInfo(BaseModel):
    """A schedule as stored: its definition plus where it stands."""

    schedule: AgentSchedule
    status: Literal["active", "paused"]
    last_fired_at: str | None = None
    """The last fire time a worker enqueued (ISO 8601), ``None`` before the first."""


FireStatus = Literal["started", "skipped", "failed"]


class FireOutcome(BaseModel):
    """What one fire did: the fire workflow's recorded result."""

    schedule: str
    fire_time: str
    """The fire time (ISO 8601, UTC)."""
    status: FireStatus
    """``started`` (or found: a repeat) the run; ``skipped``: the session had a run in flight;
    ``failed``: the start was refused (``code`` says why, e.g. an agent no worker serves)."""
    session_id: str
    run_id: str | None = None
    code: str | None = None
    message: str | None = None


class ScheduleFire(BaseModel):
    """One fire of a schedule, as listed: its workflow and, once it ran, its outcome."""

    fire_id: str
    """The fire's DBOS workflow id (``sched-{name}-{fire time}``)."""
    fire_time: str
    workflow_status: str
    """DBOS's status of the fire workflow (``ENQUEUED``, ``PENDING``, ``SUCCESS``, ...)."""
    outcome: FireOutcome | None = None


def check_schedule(schedule: AgentSchedule) -> None:
    """Refuse a cron expression or time zone DBOS would not run (:class:`InvalidScheduleError`)."""
    if not croniter.is_valid(schedule.cron, second_at_beginning=True):
        raise InvalidScheduleError(
            f"Invalid cron expression {schedule.cron!r}: use 5 fields (minute hour day month weekday) "
            "or 6 with seconds first",
            field="cron",
        )
    if schedule.timezone is not None:
        try:
            ZoneInfo(schedule.timezone)
        except (KeyError, ValueError):
            raise InvalidScheduleError(f"Unknown time zone {schedule.timezone!r}", field="timezone") from None


def _utc(when: datetime) -> datetime:
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).astimezone(UTC)


def fire_stamp(fire_time: datetime) -> str:
    """The fire time as it appears in ids: UTC, to the second (``20261127T050001Z``)."""
    return _utc(fire_time).strftime("%Y%m%dT%H%M%SZ")


def fire_session_id(schedule: AgentSchedule, fire_time: datetime) -> str:
    """The session a fire runs in: the schedule's own, or ``schedule-{name}-{stamp}`` (one per fire)."""
    return schedule.session_id or f"schedule-{schedule.name}-{fire_stamp(fire_time)}"


def fire_idempotency_key(schedule_name: str, fire_time: datetime) -> str:
    """The start's idempotency key: a repeat of the same fire finds the run the first one started."""
    return f"schedule:{schedule_name}:{fire_stamp(fire_time)}"


def fire_times(schedule: AgentSchedule, start: datetime, end: datetime) -> list[datetime]:
    """The fire times strictly between ``start`` and ``end`` (DBOS's backfill window), at most 1000.

    Checked before a backfill so that a window too wide, or the wrong way round, is refused
    (:class:`InvalidScheduleError`) instead of enqueuing thousands of runs.
    """
    start, end = _utc(start), _utc(end)
    if end <= start:
        raise InvalidScheduleError("The backfill window's end must be after its start", field="end")
    tz = ZoneInfo(schedule.timezone) if schedule.timezone else UTC
    it = croniter(schedule.cron, start.astimezone(tz), second_at_beginning=True)
    times: list[datetime] = []
    while True:
        when: datetime = it.get_next(datetime)
        if when >= end:
            return times
        times.append(when)
        if len(times) > _MAX_BACKFILL_FIRES:
            raise InvalidScheduleError(
                f"The backfill window holds more than {_MAX_BACKFILL_FIRES} fire times; backfill a shorter one",
                field="start",
            )


_FIRE_ID = re.compile(r"^sched-(?P<name>.+)-(?P<time>\d{4}-\d\d-\d\dT[^ ]+)$")


def fire_time_of(fire_id: str) -> str:
    """The fire time (ISO 8601) a fire's workflow id carries."""
    match = _FIRE_ID.match(fire_id)
    return match.group("time") if match else ""
