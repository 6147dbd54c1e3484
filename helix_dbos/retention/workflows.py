"""DBOS's rows of expired runs, through DBOS's public API only (``list_workflows``, ``delete_workflows``).

A run's DBOS rows are its workflow and every workflow it started, recursively (a sub-agent's or a
companion's run, a rate limit's admission): DBOS's ``delete_workflows`` removes a workflow's status,
input, output, steps, events, messages and streams. The tree is listed first (``parent_workflow_id``),
so a workflow that is not finished - anywhere in the tree - is seen before anything is deleted: the
caller then leaves the whole run alone (:data:`FINISHED_WORKFLOW_STATUSES`).

:class:`DbosWorkflowRows` works with the launched ``DBOS`` class (a worker's background collection)
and with a ``DBOSClient`` (``helix-dbos gc`` from a shell): both have the same two methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

__all__ = ["FINISHED_WORKFLOW_STATUSES", "DbosWorkflowRows", "WorkflowNode", "WorkflowRows"]

FINISHED_WORKFLOW_STATUSES: frozenset[str] = frozenset(
    {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}
)
"""DBOS statuses of a workflow that will not run again unless someone resumes it by hand."""


class WorkflowNode(NamedTuple):
    """One DBOS workflow of a run's tree."""

    workflow_id: str
    status: str
    parent_workflow_id: str | None


class WorkflowRows(Protocol):
    """The DBOS side of a collection: find a run's workflow tree, delete it."""

    def tree(self, workflow_ids: Sequence[str]) -> list[WorkflowNode]:
        """The workflows among ``workflow_ids`` that exist, then all their descendants (parents first)."""
        ...

    def delete(self, workflow_ids: Sequence[str]) -> None:
        """Delete these workflows (not their children: :meth:`tree` listed them)."""
        ...


class DbosWorkflowRows:
    """:class:`WorkflowRows` over ``DBOS`` (launched) or a ``DBOSClient``."""

    def __init__(self, api: Any) -> None:
        # ``DBOS`` (the class) and ``DBOSClient`` share list_workflows/delete_workflows but no type.
        self._api = api

    def tree(self, workflow_ids: Sequence[str]) -> list[WorkflowNode]:
        """Breadth first over ``parent_workflow_id``, one ``list_workflows`` per generation."""
        found: dict[str, WorkflowNode] = {}
        if not workflow_ids:
            return []
        generation = self._api.list_workflows(workflow_ids=list(workflow_ids), load_input=False, load_output=False)
        while generation:
            fresh = [w for w in generation if w.workflow_id not in found]
            for status in fresh:
                found[status.workflow_id] = WorkflowNode(status.workflow_id, status.status, status.parent_workflow_id)
            if not fresh:
                break
            generation = self._api.list_workflows(
                parent_workflow_id=[w.workflow_id for w in fresh], load_input=False, load_output=False
            )
        return list(found.values())

    def delete(self, workflow_ids: Sequence[str]) -> None:
        """One ``delete_workflows`` call: one short transaction in DBOS's system database."""
        if workflow_ids:
            self._api.delete_workflows(list(workflow_ids), delete_children=False)
