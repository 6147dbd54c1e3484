"""A real worker process for the sub-agent crash tests: launch helix-dbos on PostgreSQL with the
``planner`` / ``researcher`` agents (``sub_agent_agents.py``), maybe start a run, and wait for the
session to finish. The tests SIGKILL it while a child runs, then start it again.

The ``note`` tool appends to the file named by ``$HELIX_SUBAGENT_EFFECTS`` (set by the test).

``--legacy-call-ids`` derives the children's ids as versions before the turn and step were added
to them did: from the bare tool call id, without asking the replay patch (so nothing of it is
recorded), which is the history such a version left. A test recovers it with the current code.

``--hot-wait-only`` waits for the children hot whatever the hot window, without asking the replay
patch that lets a parent park on them (so nothing of it is recorded): the history a version before
parking left.

Usage: python sub_agent_worker.py DATABASE_URL LLM_BASE_URL SESSION_ID [--start] [--legacy-call-ids] [--hot-wait-only]
"""

from __future__ import annotations

import sys

from tests.runtime.sub_agent_agents import agents
from tests.worker_harness import serve_session

DATABASE_URL, LLM_BASE_URL, SESSION_ID = sys.argv[1:4]

if "--legacy-call-ids" in sys.argv:
    from helix_dbos.runtime import run_context

    run_context.scoped_call_ids = lambda: False

if "--hot-wait-only" in sys.argv:
    from helix_dbos.runtime import sub_agents

    sub_agents.parking_enabled = lambda run: False

planner, _ = agents(LLM_BASE_URL)
serve_session(
    DATABASE_URL,
    [planner],
    SESSION_ID,
    executor_id="sub-agent-worker",
    start="plan the weather report" if "--start" in sys.argv else None,
)
