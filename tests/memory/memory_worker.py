"""A real worker process for the memory crash test: launch helix-dbos on PostgreSQL with the memory
agent, maybe start a run, and wait for the session to finish. The test SIGKILLs it mid-run.
Launching, starting and waiting are ``tests/worker_harness.py``'s.

Usage: python memory_worker.py DATABASE_URL LLM_BASE_URL SESSION_ID [--start]
"""

from __future__ import annotations

import sys

from helix_dbos.memory import PostgresMemoryStore
from tests.memory.agents import memory_agent
from tests.worker_harness import serve_session

DATABASE_URL, LLM_BASE_URL, SESSION_ID = sys.argv[1:4]

store = PostgresMemoryStore(DATABASE_URL)
try:
    serve_session(
        DATABASE_URL,
        [memory_agent(LLM_BASE_URL, store)],
        SESSION_ID,
        executor_id="memory-worker",
        start="What is my favourite colour?" if "--start" in sys.argv else None,
    )
finally:
    store.close()
