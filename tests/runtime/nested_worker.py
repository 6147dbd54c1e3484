"""A real worker process for the nested park crash test: ``top -> mid -> leaf`` on PostgreSQL.

``top``'s tool gives ``mid`` ``MID_TIMEOUT_MS`` (0: no timeout); the model (in the test's process) holds ``leaf``.
The worker waits at most ``DEADLINE_SECONDS`` for the session (then prints ``timed out``).

``--die-continuing-a-child``: the process SIGKILLs itself when it has recorded a parked child's
continuation and is about to start its workflow (the window the orphaned-continuation test needs).

Usage: python nested_worker.py DATABASE_URL LLM_BASE_URL SESSION_ID MID_TIMEOUT_MS DEADLINE_SECONDS [--start]
       [--die-continuing-a-child]
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from helix_dbos.runtime.starting import RunStarter
from tests.runtime.nested_agents import tree
from tests.worker_harness import serve_session

DATABASE_URL, LLM_BASE_URL, SESSION_ID, MID_TIMEOUT_MS, DEADLINE_SECONDS = sys.argv[1:6]

if "--die-continuing-a-child" in sys.argv:
    start_workflow = RunStarter._start_workflow

    def die_before_a_child_continuation(self: RunStarter, agent: Any, run: Any, session: Any, *a: Any, **k: Any) -> Any:
        if run.mode == "resume" and session.parent_session_id is not None:
            os.kill(os.getpid(), signal.SIGKILL)  # recorded, not started: the crash's window
        return start_workflow(self, agent, run, session, *a, **k)

    RunStarter._start_workflow = die_before_a_child_continuation  # type: ignore[method-assign]

serve_session(
    DATABASE_URL,
    [tree(LLM_BASE_URL, mid_timeout_ms=int(MID_TIMEOUT_MS) or None)],  # 0: no timeout
    SESSION_ID,
    executor_id="nested-worker",
    start="go" if "--start" in sys.argv else None,
    deadline_seconds=float(DEADLINE_SECONDS),
)
