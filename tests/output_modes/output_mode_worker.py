"""A real worker process for the output-mode crash test: launch helix-dbos on PostgreSQL with a
native-mode agent, maybe start a run, and wait for its session to finish (launching, starting and
waiting are ``tests/worker_harness.py``'s).

The agent's ``on_message`` hook appends a line to MARKER_FILE for the assistant's answer; with
``--hold`` it then sleeps, so the test can SIGKILL the worker after the model's structured answer
was recorded and before the run committed it (the hooks step runs before the finalize step).

Usage: python output_mode_worker.py DATABASE_URL LLM_BASE_URL MARKER_FILE SESSION_ID [--start] [--hold]
"""

from __future__ import annotations

import sys
import time

from pydantic import BaseModel

from helix_dbos import define_agent
from helix_dbos.runtime.hooks import MessagePayload
from tests.worker_harness import append_line, serve_session

DATABASE_URL, LLM_BASE_URL, MARKER_FILE, SESSION_ID = sys.argv[1:5]
HOLD = "--hold" in sys.argv


class Verdict(BaseModel):
    city: str
    score: int


def on_message(payload: MessagePayload) -> None:
    if payload.message.role != "assistant":
        return
    append_line(MARKER_FILE, "answer")
    if HOLD:
        time.sleep(60)


agent = define_agent(
    "output-mode-crash-agent",
    system_prompt="Judge cities.",
    llm_config={"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0},
    output_schema=Verdict,
    output_mode="native",
    hooks={"on_message": on_message},
)

serve_session(
    DATABASE_URL,
    [agent],
    SESSION_ID,
    executor_id="output-mode-worker",
    start="Judge Paris" if "--start" in sys.argv else None,
)
