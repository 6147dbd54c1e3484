"""A real worker process for the sub-agent crash tests: launch helix-dbos on PostgreSQL with the
``planner`` / ``researcher`` agents (``sub_agent_agents.py``), maybe start a run, and wait for the
session to finish. The tests SIGKILL it while a child runs, then start it again.

The ``note`` tool appends to the file named by ``$HELIX_SUBAGENT_EFFECTS`` (set by the test).

Usage: python sub_agent_worker.py DATABASE_URL LLM_BASE_URL SESSION_ID [--start]
"""

from __future__ import annotations

import sys
import time

from helix_dbos.runtime.launch import launch, shutdown
from tests.runtime.sub_agent_agents import agents

DATABASE_URL, LLM_BASE_URL, SESSION_ID = sys.argv[1:4]

planner, _ = agents(LLM_BASE_URL)
_t0 = time.time()
executor = launch(DATABASE_URL, agents=[planner], executor_id="sub-agent-worker")
print(f"launched in {time.time() - _t0:.1f}s", flush=True)
if "--start" in sys.argv:
    executor.execute(planner, "plan the weather report", session_id=SESSION_ID)
    print("started", flush=True)
deadline = time.time() + 60
while time.time() < deadline:
    session = executor.store.load_session(SESSION_ID)
    if session is not None and session.status in ("completed", "failed"):
        print(f"finished {session.status} after {time.time() - _t0:.1f}s", flush=True)
        break
    time.sleep(0.05)
else:
    print("timed out", flush=True)
    shutdown(executor)
    sys.exit(3)
shutdown(executor)
