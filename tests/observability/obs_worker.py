"""The first worker of the observed crash test: lifecycle logs on stderr, spans to a file (see
``obs_agents``); it starts one run and waits. The test SIGKILLs it mid-run.

Usage: python obs_worker.py DATABASE_URL SESSION_ID
"""

from __future__ import annotations

import sys
import time

from helix_dbos.observability import configure_logging
from helix_dbos.runtime.launch import launch
from tests.observability.obs_agents import agents

DATABASE_URL, SESSION_ID = sys.argv[1:3]
configure_logging("INFO", "text")
(agent,) = agents()
executor = launch(DATABASE_URL, agents=[agent], executor_id="obs-worker")
executor.execute(agent, "go", session_id=SESSION_ID)
print("started", flush=True)
time.sleep(120)
