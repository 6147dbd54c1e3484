"""A real worker process for the skills crash test: launch helix-dbos on PostgreSQL with an agent
whose skills are folders on disk, maybe start a run, and wait for its session to finish
(launching, starting and waiting are ``tests/worker_harness.py``'s).

Usage: python skill_worker.py DATABASE_URL LLM_BASE_URL SKILLS_ROOT SESSION_ID [--start]
"""

from __future__ import annotations

import sys

from helix_dbos import define_agent, file_system_skill_provider
from tests.worker_harness import serve_session

DATABASE_URL, LLM_BASE_URL, SKILLS_ROOT, SESSION_ID = sys.argv[1:5]

agent = define_agent(
    "skills-crash-agent",
    system_prompt="You deploy things.",
    llm_config={"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0},
    skills=file_system_skill_provider([SKILLS_ROOT]),
    preload_skills=["pdf-processing"],
    max_steps=10,
)

serve_session(
    DATABASE_URL,
    [agent],
    SESSION_ID,
    executor_id="skills-worker",
    start="deploy" if "--start" in sys.argv else None,
)
