"""A real worker process for the double-texting crash test: three messages on one session, the
last two enqueued (``double_text="enqueue"``) while the first runs.

With ``--start`` it posts them; either way it waits until the session has three runs and none in
flight, printing ``finished completed`` (or ``timed out``, exit 3). The ``work`` tool appends
``did:<text>`` to the side-effect file so the test can pick its moment to SIGKILL the process.

Usage: python double_text_worker.py DATABASE_URL LLM_BASE_URL SIDE_EFFECT_FILE SESSION_ID [--start]
"""

from __future__ import annotations

import sys
import time

from pydantic import BaseModel

from helix_dbos import define_agent, define_tool
from helix_dbos.runtime.launch import launch, shutdown
from tests.worker_harness import append_line

DATABASE_URL, LLM_BASE_URL, SIDE_EFFECTS, SESSION_ID = sys.argv[1:5]
MESSAGES = ("first", "second", "third")


class WorkIn(BaseModel):
    text: str


def work(inp: WorkIn, ctx: object) -> dict[str, str]:
    time.sleep(0.5)
    append_line(SIDE_EFFECTS, f"did:{inp.text}")
    return {"did": inp.text}


agent = define_agent(
    "dt-crash",
    system_prompt="Do what the user asks.",
    llm_config={"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0},
    tools=[define_tool("work", description="Do the work asked", input_schema=WorkIn, execute=work)],
)

t0 = time.time()
executor = launch(DATABASE_URL, agents=[agent], executor_id="dt-crash-worker")
print(f"launched in {time.time() - t0:.1f}s", flush=True)
if "--start" in sys.argv:
    executor.execute(agent, MESSAGES[0], session_id=SESSION_ID)
    for text in MESSAGES[1:]:
        executor.execute(agent, text, session_id=SESSION_ID, double_text="enqueue")
    print("started", flush=True)
deadline = time.time() + 60
while time.time() < deadline:
    # Done when every message's run has ended. The session alone is no sign: it is idle for a moment
    # between an enqueued turn's end and the next one's start, and a read of the runs after such a
    # moment could find the last one just started.
    runs = executor.list_runs(SESSION_ID)
    if len(runs) == len(MESSAGES) and all(r.status in ("completed", "failed") for r in runs):
        session = executor.get_session(SESSION_ID)
        print(f"finished {session.status if session else 'missing'} after {time.time() - t0:.1f}s", flush=True)
        break
    time.sleep(0.05)
else:
    print("timed out", flush=True)
    shutdown(executor)
    sys.exit(3)
shutdown(executor)
