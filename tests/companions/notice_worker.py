"""A real worker process for the notice crash test: a lead with a non-blocking ``monitor`` companion.

The lead spawns the monitor, then calls ``pause`` until the monitor's completion notice arrives;
``pause`` appends ``pause`` to a file, so the test counts side effects across processes.

Usage: python notice_worker.py DATABASE_URL LLM_BASE_URL SIDE_EFFECT_FILE SESSION_ID [--start]
"""

from __future__ import annotations

import sys
import time

from pydantic import BaseModel

from helix_dbos import PersistentAgentConfig, define_agent, define_tool
from tests.worker_harness import append_line, serve_session

DATABASE_URL, LLM_BASE_URL, SIDE_EFFECTS, SESSION_ID = sys.argv[1:5]


class Verdict(BaseModel):
    verdict: str
    round: int


class Report(BaseModel):
    verdicts: list[str]


class PauseIn(BaseModel):
    seconds: float


def pause(inp: PauseIn, ctx: object) -> dict[str, bool]:
    append_line(SIDE_EFFECTS, "pause")
    time.sleep(inp.seconds)
    return {"paused": True}


LLM = {"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0}
monitor = define_agent("monitor", system_prompt="MONITOR: watch.", llm_config=LLM, output_schema=Verdict)
lead = define_agent(
    "notice-lead",
    system_prompt="LEAD: delegate, then wait for the notice.",
    llm_config=LLM,
    output_schema=Report,
    tools=[define_tool("pause", input_schema=PauseIn, execute=pause)],
    persistent_agents=[PersistentAgentConfig(agent=monitor, mode="non-blocking")],
)

serve_session(
    DATABASE_URL,
    [lead],
    SESSION_ID,
    executor_id="notice-worker",
    start="go" if "--start" in sys.argv else None,
    deadline_seconds=90,
    poll_seconds=0.1,
)
