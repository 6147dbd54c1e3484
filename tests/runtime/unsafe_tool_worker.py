"""A worker process for the not-retry-safe tool crash tests (``tests/runtime/test_unsafe_tool_crash.py``).

Launches helix-dbos on PostgreSQL with the charging agent, optionally starts its run, and waits for
the session to finish (``tests/worker_harness.py``). The test SIGKILLs it while ``charge`` runs.

Usage: python unsafe_tool_worker.py DATABASE_URL LLM_BASE_URL SIDE_EFFECT_FILE SESSION_ID [--start] [--retry-safe]
       [--report] [--no-block]

``--report``: the tool's ``unknown_outcome`` is ``"report"``; ``--no-block``: its first call does not block.
"""

from __future__ import annotations

import sys

from helix_dbos.observability import configure_logging
from tests.runtime.unsafe_tool_agents import charging_agent
from tests.worker_harness import serve_session

DATABASE_URL, LLM_BASE_URL, SIDE_EFFECTS, SESSION_ID = sys.argv[1:5]

# The run is on the run queue, so this worker or the test process may recover it: its ERROR record
# must reach this process's output (the package logs nowhere by default) for the test to see it.
configure_logging("WARNING")

serve_session(
    DATABASE_URL,
    [
        charging_agent(
            LLM_BASE_URL,
            SIDE_EFFECTS,
            retry_safe="--retry-safe" in sys.argv,
            unknown_outcome="report" if "--report" in sys.argv else None,
            block="--no-block" not in sys.argv,
        )
    ],
    SESSION_ID,
    executor_id="unsafe-tool-worker",
    start="go" if "--start" in sys.argv else None,
    poll_seconds=0.1,
)
