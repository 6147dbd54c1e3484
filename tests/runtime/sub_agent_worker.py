"""A real worker process for the sub-agent crash tests: launch helix-dbos on PostgreSQL with the
``planner`` / ``researcher`` agents (``sub_agent_agents.py``), maybe start a run, and wait for the
session to finish. The tests SIGKILL it while a child runs, then start it again.

The ``note`` tool appends to the file named by ``$HELIX_SUBAGENT_EFFECTS`` (set by the test).

Usage: python sub_agent_worker.py DATABASE_URL LLM_BASE_URL SESSION_ID [--start]
"""

from __future__ import annotations

import sys

from tests.runtime.sub_agent_agents import agents
from tests.worker_harness import serve_session

DATABASE_URL, LLM_BASE_URL, SESSION_ID = sys.argv[1:4]

planner, _ = agents(LLM_BASE_URL)
serve_session(
    DATABASE_URL,
    [planner],
    SESSION_ID,
    executor_id="sub-agent-worker",
    start="plan the weather report" if "--start" in sys.argv else None,
)
