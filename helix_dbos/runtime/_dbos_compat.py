"""Every use of DBOS beyond its public API, in one place, pinned to the DBOS version by a test.

helix-dbos builds on ``dbos==3.4.0``. Where it needs something DBOS does not export, the need is
met here and nowhere else, so an upgrade of DBOS has one module to check (``tests/unit/
test_dbos_compat.py`` fails on another version until it is checked):

- :data:`AwaitedWorkflowCancelledError`: what ``WorkflowHandle.get_result()`` raises for a
  workflow cancelled while it was awaited (an abort); DBOS raises it but does not export it.
- DBOS unwinds a workflow it no longer runs (cancelled, no longer owned) with its private
  ``DBOSBaseException`` family, ``BaseException`` subclasses, so workflow code's ``except Exception``
  (the loop's last-resort ``fail_run``) never catches them; its ordinary errors (``DBOSException``:
  a conflicting workflow id, a step timeout) are failures like any other.
  ``tests/unit/test_dbos_compat.py`` pins that split.

- :func:`set_schedule_last_fired_at`: DBOS catches a schedule up from its ``last_fired_at`` when a
  thread for it starts (at launch, and on resume); resuming an agent schedule moves that mark to
  the resume time, so the fires a pause skipped are not run by surprise (:mod:`.schedules`). DBOS
  has no public setter.

Re-enqueueing a dead worker's runs, once ``DBOS._recover_pending_workflows``, is done through the
public ``list_workflows`` and ``resume_workflow`` (:mod:`helix_dbos.runtime.recovery`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dbos._error import (
    DBOSAwaitedWorkflowCancelledError,
    DBOSStepNondeterminismError,
    DBOSUnexpectedStepError,
)

DBOS_VERSION = "3.4.0"
"""The DBOS version this module was checked against."""

AwaitedWorkflowCancelledError = DBOSAwaitedWorkflowCancelledError


def is_dbos_replay_error(exc: BaseException) -> bool:
    """Whether ``exc`` is DBOS finding that a replayed workflow diverged from its record.

    Such an error must end the workflow, never be turned into a result: a workflow start that
    raised it (a child started from workflow code) is not a "start failure" the model can see.
    """
    return isinstance(exc, DBOSUnexpectedStepError | DBOSStepNondeterminismError)


def set_schedule_last_fired_at(dbos_api: Any, schedule_name: str, when: datetime) -> None:
    """Move a DBOS schedule's ``last_fired_at`` mark (what its automatic backfill starts from).

    ``dbos_api`` is the ``DBOS`` class of a launched process or a ``DBOSClient``: both keep their
    system database in the private ``_sys_db``; the ``DBOS`` class reaches it through its instance.
    """
    if isinstance(dbos_api, type):
        from dbos._dbos import _get_dbos_instance

        sys_db = _get_dbos_instance()._sys_db
    else:
        sys_db = dbos_api._sys_db
    sys_db.update_last_fired_at(schedule_name, when.isoformat())


__all__ = ["DBOS_VERSION", "AwaitedWorkflowCancelledError", "is_dbos_replay_error", "set_schedule_last_fired_at"]
