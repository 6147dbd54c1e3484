"""A real worker process for the awaiting-children crash tests: launch helix-dbos on PostgreSQL with
the ``root`` -> blocking ``clerk`` companion (``test_hitl_routing.tree_agents``), a short hot window,
maybe start the run, answer the clerk's call through the root once the root has parked, and wait
for the root to finish.

Usage: python await_worker.py DATABASE_URL LLM_BASE_URL SESSION_ID [--start] [--answer]
"""

from __future__ import annotations

import sys
import time

from helix_dbos import launch, shutdown
from helix_dbos.errors import ToolCallAlreadyAnsweredError
from tests.companions.test_hitl_routing import answer, tree_agents

DATABASE_URL, LLM_BASE_URL, SESSION_ID = sys.argv[1:4]

root = tree_agents(LLM_BASE_URL, 1)
executor = launch(DATABASE_URL, agents=[root], executor_id="await-worker", hot_window_seconds=0.3)
print("launched", flush=True)
if "--start" in sys.argv:
    executor.execute(root, "go", session_id=SESSION_ID)
    print("started", flush=True)
deadline = time.time() + 60
while time.time() < deadline:
    run = executor.store.get_current_run(SESSION_ID)
    if "--answer" in sys.argv and run is not None and run.status == "suspended":  # answered once parked
        for call in executor.list_pending_tool_calls(SESSION_ID):
            try:
                executor.submit_tool_result(SESSION_ID, answer(call.tool_call_id, "Lyon"))
                print("answered", flush=True)
            except ToolCallAlreadyAnsweredError:
                pass
    session = executor.store.load_session(SESSION_ID)
    if session is not None and session.status in ("completed", "failed", "interrupted"):
        print(f"finished {session.status}", flush=True)
        break
    time.sleep(0.05)
else:
    print("timed out", flush=True)
    shutdown(executor)
    sys.exit(3)
shutdown(executor)
