"""Scheduled agents: cron schedules that start an agent run at each fire time, on DBOS's dynamic schedules.

- :mod:`.model`: :class:`AgentSchedule` and the ids a fire derives (pure);
- :mod:`.fire`: the fire workflow (``helix.schedule.fire``), which starts the run;
- :mod:`.book`: :class:`ScheduleBook`, create / list / pause / resume / delete / backfill, over a
  launched process's ``DBOS`` or a ``DBOSClient``.

``executor.schedules`` is a :class:`ScheduleBook`; the service serves it under ``/v1/schedules`` and
the CLI as ``helix-dbos schedules``. The missed-fire policy is stated in :mod:`.book`.
"""

from helix_dbos.runtime.schedules.book import BackfillResult, ScheduleBook
from helix_dbos.runtime.schedules.fire import schedule_fire_workflow
from helix_dbos.runtime.schedules.model import (
    FIRE_WORKFLOW_NAME,
    AgentSchedule,
    FireOutcome,
    MissedFires,
    ScheduleFire,
    ScheduleInfo,
)

__all__ = [
    "FIRE_WORKFLOW_NAME",
    "AgentSchedule",
    "BackfillResult",
    "FireOutcome",
    "MissedFires",
    "ScheduleBook",
    "ScheduleFire",
    "ScheduleInfo",
    "schedule_fire_workflow",
]
