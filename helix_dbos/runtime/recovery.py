"""Re-enqueue the runs a dead worker left in flight, so that any live worker finishes them.

DBOS recovers a process's ``PENDING`` workflows only when a process with the same executor id
starts again. For a worker that never comes back (its machine is gone), its pending agent runs are
moved to DBOS's internal queue with the public ``resume_workflow`` (``PENDING`` -> ``ENQUEUED``),
where every live process of the application dequeues them. Used by the takeover of dead workers
and by ``helix-dbos recover``.
"""

from __future__ import annotations

from typing import Any

from helix_dbos.runtime.workflow import AGENT_WORKFLOW_NAME


def requeue_pending_runs(lister: Any, executor_ids: list[str], app_version: str) -> tuple[list[str], list[str]]:
    """Re-enqueue the ``PENDING`` agent runs of ``executor_ids``; returns them, and the runs already queued.

    ``lister`` is ``DBOS`` (inside a launched process) or a ``DBOSClient`` (from outside one): both
    list and resume workflows the same way.
    """

    def ids(**filters: Any) -> list[str]:
        found = lister.list_workflows(
            name=AGENT_WORKFLOW_NAME, app_version=app_version, load_input=False, load_output=False, **filters
        )
        return [w.workflow_id for w in found]

    pending = ids(status="PENDING", executor_id=executor_ids)
    queued = ids(status="ENQUEUED")
    for workflow_id in pending:
        lister.resume_workflow(workflow_id)
    return pending, queued


__all__ = ["requeue_pending_runs"]
