"""A real worker process for the memory crash test: launch helix-dbos on PostgreSQL with the memory
agent, maybe start a run, and wait for the session to finish. The test SIGKILLs it mid-run.

Usage: python memory_worker.py DATABASE_URL LLM_BASE_URL SESSION_ID [--start]
"""

from __future__ import annotations

import sys
import time

from helix_dbos.memory import PostgresMemoryStore
from helix_dbos.runtime.launch import launch, shutdown
from tests.memory.agents import memory_agent

DATABASE_URL, LLM_BASE_URL, SESSION_ID = sys.argv[1:4]

store = PostgresMemoryStore(DATABASE_URL)
agent = memory_agent(LLM_BASE_URL, store)
executor = launch(DATABASE_URL, agents=[agent], executor_id="memory-worker")
if "--start" in sys.argv:
    executor.execute(agent, "What is my favourite colour?", session_id=SESSION_ID)
    print("started", flush=True)
deadline = time.time() + 60
while time.time() < deadline:
    session = executor.store.load_session(SESSION_ID)
    if session is not None and session.status in ("completed", "failed"):
        print(f"finished {session.status}", flush=True)
        break
    time.sleep(0.1)
else:
    print("timed out", flush=True)
    shutdown(executor)
    sys.exit(3)
shutdown(executor)
store.close()
