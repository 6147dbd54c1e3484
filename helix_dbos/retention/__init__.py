"""Retention: a policy of what to keep, and the collection that deletes the rest.

| Module | Role |
| --- | --- |
| ``policy.py`` | :class:`RetentionPolicy` / :class:`RetentionRules`: keep days, keep failed days, keep last K runs |
| ``planner.py`` | pure: sessions, runs, policy and the time -> :class:`RetentionPlan` |
| ``inventory.py`` | reads: sessions a page at a time with their runs, the live families |
| ``executor.py`` | :func:`collect_garbage`: the plan carried out in small key-listed batches |
| ``workflows.py`` | DBOS's rows, through ``list_workflows`` / ``delete_workflows`` |
| ``sweeper.py`` | :class:`RetentionSweeper`: the background collection of a worker or server |

``docs/retention.md`` has the rules, the command line (``helix-dbos gc``) and the rows one run costs.
"""

from __future__ import annotations

from helix_dbos.retention.executor import DBOS_WORKFLOWS, GcReport, collect_garbage, execute_plan
from helix_dbos.retention.planner import (
    RetentionPlan,
    RunExpiry,
    RunFacts,
    SessionExpiry,
    SessionFacts,
    plan_retention,
)
from helix_dbos.retention.policy import RetentionPolicy, RetentionPolicyError, RetentionRules
from helix_dbos.retention.sweeper import RetentionSweeper
from helix_dbos.retention.workflows import DbosWorkflowRows, WorkflowNode, WorkflowRows

__all__ = [
    "DBOS_WORKFLOWS",
    "DbosWorkflowRows",
    "GcReport",
    "RetentionPlan",
    "RetentionPolicy",
    "RetentionPolicyError",
    "RetentionRules",
    "RetentionSweeper",
    "RunExpiry",
    "RunFacts",
    "SessionExpiry",
    "SessionFacts",
    "WorkflowNode",
    "WorkflowRows",
    "collect_garbage",
    "execute_plan",
    "plan_retention",
]
