"""The DBOS workflow that is an agent run.

Its source is deliberately one line: DBOS hashes the source of every registered workflow into the
application version, and a changed version strands runs in flight. Agents, prompts and the loop
itself live elsewhere, so editing them never changes this hash. Importing this module registers
the workflow, which is what lets helix-dbos live inside a user's own DBOS app: import, then
``DBOS.launch()``.
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from helix_dbos.runtime.loop import run_agent_loop
from helix_dbos.runtime.run_context import RunRequest
from helix_dbos.runtime.step_names import AGENT_WORKFLOW_NAME

__all__ = ["AGENT_WORKFLOW_NAME", "agent_run_workflow"]


@DBOS.workflow(name=AGENT_WORKFLOW_NAME)
def agent_run_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """Run one agent run; input and output are plain JSON (see ``RunRequest`` / ``RunSummary``)."""
    return run_agent_loop(RunRequest.model_validate(request)).model_dump(mode="json")
