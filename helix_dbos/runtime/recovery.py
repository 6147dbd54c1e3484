"""Runs left behind by a crash: re-enqueue a dead worker's runs; find runs whose workflow never started.

DBOS recovers a process's ``PENDING`` workflows only when a process with the same executor id
starts again. For a worker that never comes back (its machine is gone), its pending agent runs are
moved to DBOS's internal queue with the public ``resume_workflow`` (``PENDING`` -> ``ENQUEUED``),
where every live process of the application dequeues them; a run that came from a run queue
(:mod:`.queues`) goes back to that queue instead. Used by the takeover of dead workers
and by ``helix-dbos recover``.

A crash between ``execute``'s store write and its ``DBOS.start_workflow`` leaves an *orphaned* run:
recorded ``running``, with no workflow. :func:`runs_without_workflow` finds them for the executor.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dbos import DBOS

from helix_dbos.observability import lifecycle
from helix_dbos.observability.run_observer import executor_id
from helix_dbos.runtime.step_names import AGENT_WORKFLOW_NAME
from helix_dbos.store.base import RunRecord, SessionStore


def requeue_pending_runs(lister: Any, executor_ids: list[str], app_version: str) -> tuple[list[str], list[str]]:
    """Re-enqueue the ``PENDING`` agent runs of ``executor_ids``; returns them, and the runs already queued.

    ``lister`` is ``DBOS`` (inside a launched process) or a ``DBOSClient`` (from outside one): both
    list and resume workflows the same way.
    """

    def found(**filters: Any) -> list[Any]:
        return list(
            lister.list_workflows(
                name=AGENT_WORKFLOW_NAME, app_version=app_version, load_input=False, load_output=False, **filters
            )
        )

    pending = found(status="PENDING", executor_id=executor_ids)
    queued = [w.workflow_id for w in found(status="ENQUEUED")]
    for status in pending:
        # A run dequeued from a run queue goes back to that queue (its limits still apply to it);
        # a run started locally goes to DBOS's internal queue, which every process dequeues.
        queue_name = status.queue_name if status.queue_name and not status.queue_name.startswith("_dbos") else None
        lister.resume_workflow(status.workflow_id, queue_name=queue_name)
    if pending:
        lifecycle.log_event(
            "runs_requeued",
            None,
            None,
            dead_executor_ids=executor_ids,
            by_executor_id=executor_id(),
            workflow_ids=[w.workflow_id for w in pending],
        )
    return [w.workflow_id for w in pending], queued


def runs_without_workflow(store: SessionStore, *, page_size: int = 500) -> Iterator[RunRecord]:
    """Runs recorded ``running`` whose workflow DBOS does not know: candidate orphans.

    Looks only at runs recorded ``running`` (an indexed query, paged by run id so none is missed),
    and asks DBOS which of their workflows exist, one query per page: the cost is the number of
    runs in flight, flat in the number of parked or finished sessions.
    """
    after: str | None = None
    while True:
        page = store.list_running_runs(after_run_id=after, limit=page_size)
        if not page:
            return
        after = page[-1].run_id
        ids = [run.workflow_id for run in page]
        known = {w.workflow_id for w in DBOS.list_workflows(workflow_ids=ids, load_input=False, load_output=False)}
        yield from (run for run in page if run.workflow_id not in known)
        if len(page) < page_size:
            return


__all__ = ["requeue_pending_runs", "runs_without_workflow"]
