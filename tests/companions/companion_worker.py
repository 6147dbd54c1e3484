"""A real worker process for the companion crash tests: a writer that consults a critic twice.

The critic records each consult with its ``record`` tool before it answers; the tool writes
``start:{text}``, sleeps on ``draft two`` (the re-consult), then ``append:{text}``, to a file, so the
test counts side effects across processes and can SIGKILL the worker mid-re-consult.

Usage: python companion_worker.py DATABASE_URL LLM_BASE_URL SIDE_EFFECT_FILE SESSION_ID [--start]
"""

from __future__ import annotations

import sys
import time

from pydantic import BaseModel

from helix_dbos import PersistentAgentConfig, define_agent, define_tool
from tests.worker_harness import append_line, serve_session

DATABASE_URL, LLM_BASE_URL, SIDE_EFFECTS, SESSION_ID = sys.argv[1:5]
SLOW_SECONDS = 1.5


class Verdict(BaseModel):
    verdict: str
    round: int


class Report(BaseModel):
    verdicts: list[str]


class RecordIn(BaseModel):
    text: str


def record(inp: RecordIn, ctx: object) -> dict[str, str]:
    append_line(SIDE_EFFECTS, f"start:{inp.text}")
    if inp.text == "draft two":
        time.sleep(SLOW_SECONDS)
    append_line(SIDE_EFFECTS, f"append:{inp.text}")
    return {"recorded": inp.text}


LLM = {"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0}
critic = define_agent(
    "crash-critic",
    system_prompt="CRITIC: record the draft, then judge it.",
    llm_config=LLM,
    output_schema=Verdict,
    tools=[define_tool("record", input_schema=RecordIn, execute=record)],
)
writer = define_agent(
    "crash-writer",
    system_prompt="WRITER: consult the critic twice.",
    llm_config=LLM,
    output_schema=Report,
    persistent_agents=[PersistentAgentConfig(agent=critic, mode="blocking")],
)

serve_session(
    DATABASE_URL,
    [writer],
    SESSION_ID,
    executor_id="companion-worker",
    start="write" if "--start" in sys.argv else None,
    deadline_seconds=90,
    poll_seconds=0.1,
)
