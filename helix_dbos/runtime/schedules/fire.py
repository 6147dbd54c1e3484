"""The fire workflow: what one fire time of an agent schedule does.

DBOS's scheduler enqueues this workflow once per fire time under ``sched-{name}-{fire time}``
(:mod:`.model`), with the fire time and the schedule as JSON. It starts the agent run through the
executor's ordinary start (the same store transaction and deterministic workflow id as
``execute``), keyed by :func:`~.model.fire_idempotency_key`: when the fire workflow runs again
(recovered after a crash), the start finds the run it started instead of starting another.

A schedule that continues one session runs one turn per fire. When the session still has a run in
flight at a fire time, the fire is **skipped and recorded** (``status="skipped"``,
``code="state_already_running"``): fires do not queue up behind a slow run. A start refused for
another reason (an agent this process does not serve, a session of another agent) is recorded as
``failed`` with the error's code; neither is retried, since the next fire time comes anyway.

The start is workflow code, not a step: DBOS refuses to start a workflow from inside a step, and
the start is idempotent by its key, so running it again on recovery is safe. What the fire did is
the workflow's recorded result (:class:`~.model.FireOutcome`), which :meth:`ScheduleBook.fires
<helix_dbos.runtime.schedules.book.ScheduleBook.fires>` lists.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dbos import DBOS

from helix_dbos.errors import AgentAlreadyRunningError, HelixError
from helix_dbos.logger import std_logger
from helix_dbos.runtime import services as runtime_services
from helix_dbos.runtime.schedules.model import (
    FIRE_WORKFLOW_NAME,
    AgentSchedule,
    FireOutcome,
    fire_idempotency_key,
    fire_session_id,
)
from helix_dbos.session import AgentInput

__all__ = ["fire_schedule", "schedule_fire_workflow"]

_logger = std_logger("helix_dbos.schedules")


@DBOS.workflow(name=FIRE_WORKFLOW_NAME)
def schedule_fire_workflow(fire_time: datetime, schedule: dict[str, Any]) -> dict[str, Any]:
    """One fire of an agent schedule; input and output are plain JSON (see :func:`fire_schedule`)."""
    return fire_schedule(fire_time, AgentSchedule.model_validate(schedule)).model_dump(mode="json")


def fire_schedule(fire_time: datetime, schedule: AgentSchedule) -> FireOutcome:
    """Start ``schedule``'s run for ``fire_time`` (or find it), and say what happened."""
    starter = runtime_services.current().starter
    session_id = fire_session_id(schedule, fire_time)
    outcome = FireOutcome(
        schedule=schedule.name,
        fire_time=fire_time.astimezone(UTC).isoformat(),
        status="started",
        session_id=session_id,
    )
    if starter is None:  # an executor always sets it; a bare RuntimeServices does not
        return outcome.model_copy(
            update={"status": "failed", "code": "framework_internal_error", "message": "no run starter installed"}
        )
    try:
        handle = starter.execute(
            schedule.agent,
            AgentInput(message=schedule.message, state=schedule.state),
            session_id=session_id,
            idempotency_key=fire_idempotency_key(schedule.name, fire_time),
            tenant=schedule.tenant,
        )
    except AgentAlreadyRunningError as exc:
        _logger.info(
            "[helix-dbos] schedule fire skipped: the session has a run in flight",
            {"schedule": schedule.name, "fire_time": outcome.fire_time, "session_id": session_id},
        )
        return outcome.model_copy(update={"status": "skipped", "code": exc.code, "message": exc.message})
    except HelixError as exc:
        _logger.warn(
            "[helix-dbos] schedule fire could not start its run",
            {"schedule": schedule.name, "fire_time": outcome.fire_time, "code": exc.code},
        )
        return outcome.model_copy(update={"status": "failed", "code": exc.code, "message": exc.message})
    return outcome.model_copy(update={"run_id": handle.run_id})
