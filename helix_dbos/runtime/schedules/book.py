"""``ScheduleBook``: create, list, pause, resume, delete and backfill agent schedules.

The schedules themselves are DBOS's dynamic schedules, stored in DBOS's system database
(``workflow_schedules``) on PostgreSQL or SQLite alike; every launched process polls that table
(:func:`helix_dbos.launch` polls every second, so a change takes effect within about a second) and
runs one timer thread per active schedule. This module is only the typed front over DBOS's
schedule API, shared by the three ways in: ``executor.schedules`` (over the ``DBOS`` class of a
launched process), HTTP (``/v1/schedules``) and the CLI (over a ``DBOSClient``, no launch).

**Missed fires** (the policy, per schedule, :attr:`AgentSchedule.missed_fires`):

- ``run_each`` (default): fire times that passed while no worker was running are each run once
  when a worker starts again; DBOS backfills from the schedule's last fire time, under the same
  ids, so a time that did fire is never run twice.
- ``skip``: they are dropped; firing resumes at the next fire time.
- A **pause** is not downtime: fires a paused schedule would have had are never run by surprise.
  :meth:`ScheduleBook.resume` moves the schedule's last-fire mark to the resume time, so nothing is
  caught up; :meth:`ScheduleBook.backfill` runs a chosen window (each fire time once) on purpose.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dbos import DBOS, DBOSClient
from pydantic import BaseModel, ValidationError

from helix_dbos.errors import ScheduleExistsError, ScheduleNotFoundError
from helix_dbos.runtime._dbos_compat import set_schedule_last_fired_at
from helix_dbos.runtime.schedules.fire import schedule_fire_workflow
from helix_dbos.runtime.schedules.model import (
    FIRE_WORKFLOW_NAME,
    AgentSchedule,
    FireOutcome,
    ScheduleFire,
    ScheduleInfo,
    check_schedule,
    fire_time_of,
    fire_times,
)
from helix_dbos.tenancy import DEFAULT_TENANT

__all__ = ["BackfillResult", "ScheduleBook"]

DBOSScheduleApi = type[DBOS] | DBOSClient
"""Where schedules are kept: the ``DBOS`` class (a launched process) or a ``DBOSClient`` (the CLI)."""


class BackfillResult(BaseModel):
    """What a backfill did: every fire time of the window, split by whether it was new."""

    schedule: str
    fires: list[ScheduleFire]
    """Every fire of the window, oldest first."""
    enqueued: list[str]
    """The fire ids this backfill enqueued (fire times that had not fired)."""
    already_fired: list[str]
    """The fire ids that existed already (fired live, or by an earlier backfill): not run again."""


class ScheduleBook:
    """The agent schedules of one DBOS application (see the module docstring)."""

    def __init__(self, api: DBOSScheduleApi, *, check_agent: Callable[[str], object] | None = None) -> None:
        """``check_agent`` raises for an agent name this process cannot run (the executor's registry lookup)."""
        self._api = api
        self._check_agent = check_agent
        self._gap_filler: Any = None

    def fill_launch_gap(self, launched_at: datetime) -> None:
        """Watch for the fire DBOS's catch-up at a launch can drop, and run it (:mod:`.launch_gap`).

        :func:`helix_dbos.launch` calls it right after ``DBOS.launch()``; :meth:`close` stops it.
        """
        from helix_dbos.runtime.schedules.launch_gap import LaunchGapFiller

        self.close()
        self._gap_filler = LaunchGapFiller(self, launched_at)
        self._gap_filler.start()

    def close(self) -> None:
        """Stop the launch-gap watch, if one runs."""
        if self._gap_filler is not None:
            self._gap_filler.stop()
            self._gap_filler = None

    # -- definition --------------------------------------------------------------------------------
    def create(self, schedule: AgentSchedule | dict[str, Any]) -> ScheduleInfo:
        """Store a new schedule; it fires from its next fire time on (paused when ``enabled=False``).

        Raises :class:`InvalidScheduleError` (cron or time zone), :class:`ScheduleExistsError`,
        :class:`AgentNotFoundError` (an agent this process does not serve).
        """
        spec = schedule if isinstance(schedule, AgentSchedule) else AgentSchedule.model_validate(schedule)
        check_schedule(spec)
        if self._check_agent is not None:
            self._check_agent(spec.agent)
        if self._raw(spec.name) is not None:
            raise ScheduleExistsError(spec.name)
        options: dict[str, Any] = {
            "schedule_name": spec.name,
            "schedule": spec.cron,
            "context": spec.model_dump(mode="json"),
            "automatic_backfill": spec.missed_fires == "run_each",
            "cron_timezone": spec.timezone,
        }
        try:
            if isinstance(self._api, DBOSClient):
                self._api.create_schedule(workflow_name=FIRE_WORKFLOW_NAME, **options)
            else:
                self._api.create_schedule(workflow_fn=schedule_fire_workflow, **options)  # type: ignore[arg-type]
        except Exception:
            if self._raw(spec.name) is not None:  # lost a race with another create of the same name
                raise ScheduleExistsError(spec.name) from None
            raise
        if not spec.enabled:
            self._api.pause_schedule(spec.name)
        return self.get(spec.name)

    def get(self, name: str, *, tenant: str | None = None) -> ScheduleInfo:
        """The schedule named ``name``; :class:`ScheduleNotFoundError` if there is none.

        With ``tenant`` (every method takes it, as the service passes the caller's), another
        tenant's schedule is not found either.
        """
        raw = self._raw(name)
        info = None if raw is None else _info(raw)
        if info is None or not _visible(info, tenant):
            raise ScheduleNotFoundError(name)
        return info

    def list(self, *, tenant: str | None = None) -> builtins.list[ScheduleInfo]:
        """Every agent schedule (of ``tenant``, when given), by name."""
        found = [_info(raw) for raw in self._api.list_schedules(workflow_name=FIRE_WORKFLOW_NAME)]
        visible = (info for info in found if info is not None and _visible(info, tenant))
        return sorted(visible, key=lambda info: info.schedule.name)

    def pause(self, name: str, *, tenant: str | None = None) -> ScheduleInfo:
        """Stop firing (within the polling interval); its fire times until a resume are not run."""
        self.get(name, tenant=tenant)
        self._api.pause_schedule(name)
        return self.get(name)

    def resume(self, name: str, *, tenant: str | None = None) -> ScheduleInfo:
        """Fire again from the next fire time; the paused window is not caught up (backfill it to run it)."""
        info = self.get(name, tenant=tenant)
        if info.status == "paused":
            set_schedule_last_fired_at(self._api, name, datetime.now(UTC))
            self._api.resume_schedule(name)
        return self.get(name)

    def delete(self, name: str, *, tenant: str | None = None) -> None:
        """Remove the schedule; fires already enqueued still run, and its runs and sessions stay."""
        self.get(name, tenant=tenant)
        self._api.delete_schedule(name)

    # -- fires -------------------------------------------------------------------------------------
    def backfill(self, name: str, start: datetime, end: datetime, *, tenant: str | None = None) -> BackfillResult:
        """Run each fire time strictly between ``start`` and ``end`` that has not fired, once.

        A fire time that fired already (live, or by an earlier backfill) has a workflow under the
        same id and is not run again, so backfilling a window twice adds nothing. At most 1000
        fire times per call; naive datetimes are UTC. Works on a paused schedule too.
        """
        spec = self.get(name, tenant=tenant).schedule
        fire_times(spec, start, end)  # bounds the window (InvalidScheduleError) before DBOS enqueues
        before = {f.fire_id for f in self._fires(name, None)}
        handles = self._api.backfill_schedule(name, _utc(start), _utc(end))
        ids = [h.get_workflow_id() for h in handles]
        fires = {f.fire_id: f for f in self._fires(name, ids)} if ids else {}
        return BackfillResult(
            schedule=name,
            fires=[fires[i] for i in ids if i in fires],
            enqueued=[i for i in ids if i not in before],
            already_fired=[i for i in ids if i in before],
        )

    def fires(self, name: str, *, limit: int = 100, tenant: str | None = None) -> builtins.list[ScheduleFire]:
        """The schedule's most recent fires (newest first) with what each did."""
        self.get(name, tenant=tenant)
        return self._fires(name, None, limit=limit)

    def _fires(
        self, name: str, ids: builtins.list[str] | None, *, limit: int | None = None
    ) -> builtins.list[ScheduleFire]:
        statuses = self._api.list_workflows(
            workflow_ids=ids,
            name=FIRE_WORKFLOW_NAME,
            schedule_name=name,
            sort_desc=True,
            limit=limit,
            load_input=False,
            load_output=True,
        )
        fires = [_fire(s.workflow_id, s.status, s.output) for s in statuses]
        return sorted(fires, key=lambda f: f.fire_time, reverse=ids is None)

    def _raw(self, name: str) -> dict[str, Any] | None:
        raw = self._api.get_schedule(name)
        if raw is None or raw["workflow_name"] != FIRE_WORKFLOW_NAME:
            return None  # another workflow's DBOS schedule is not an agent schedule
        return dict(raw)


def _visible(info: ScheduleInfo, tenant: str | None) -> bool:
    return tenant is None or (info.schedule.tenant or DEFAULT_TENANT) == tenant


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _info(raw: Any) -> ScheduleInfo | None:
    try:
        spec = AgentSchedule.model_validate(raw["context"])
    except ValidationError:
        return None
    status = "paused" if raw["status"] == "PAUSED" else "active"
    return ScheduleInfo(schedule=spec, status=status, last_fired_at=raw.get("last_fired_at"))


def _fire(fire_id: str, status: str, output: Any) -> ScheduleFire:
    outcome = None
    if isinstance(output, dict):
        try:
            outcome = FireOutcome.model_validate(output)
        except ValidationError:
            outcome = None
    fire_time = outcome.fire_time if outcome is not None else fire_time_of(fire_id)
    return ScheduleFire(fire_id=fire_id, fire_time=fire_time, workflow_status=status, outcome=outcome)
