"""A real worker process for the skills crash test: launch helix-dbos on PostgreSQL with an agent
whose skills are folders on disk, maybe start a run, and wait for its session to finish.

Usage: python skill_worker.py DATABASE_URL LLM_BASE_URL SKILLS_ROOT SESSION_ID [--start]
"""

from __future__ import annotations

import sys
import time

from helix_dbos import define_agent, file_system_skill_provider
from helix_dbos.runtime.launch import launch, shutdown

DATABASE_URL, LLM_BASE_URL, SKILLS_ROOT, SESSION_ID = sys.argv[1:5]

agent = define_agent(
    "skills-crash-agent",
    system_prompt="You deploy things.",
    llm_config={"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0},
    skills=file_system_skill_provider([SKILLS_ROOT]),
    preload_skills=["pdf-processing"],
    max_steps=10,
)

executor = launch(DATABASE_URL, agents=[agent], executor_id="skills-worker")
if "--start" in sys.argv:
    executor.execute(agent, "deploy", session_id=SESSION_ID)
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
