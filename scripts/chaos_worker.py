"""One worker process of the chaos run (``scripts/chaos.py``): launch helix-dbos, maybe start runs, serve.

The controller starts several of these on one PostgreSQL database, SIGKILLs them at random and
starts them again with the same executor id, so DBOS recovers each one's runs (and live workers
take over the runs of a worker that stays down).

The agent calls the ``work`` tool once per step. ``work`` records its side effect *outside the
engine*, in a file of this process's own (``effects/<executor>-<pid>.log``, one line per call:
``<tool_call_id> <epoch_ms>``), so the controller can count how often each call really ran.

It reads commands on standard input, one a line: ``start SESSION_ID`` starts a session (and
prints ``started SESSION_ID`` once ``execute``
returned, ``failed SESSION_ID`` if it raised); end of input or SIGTERM shuts it down.

Usage: python chaos_worker.py DATABASE_URL LLM_BASE_URL EFFECTS_DIR EXECUTOR_ID
       [--tool-seconds=S] [--takeover-after=S]
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from helix_dbos import AgentConfig, ToolContext, define_agent, define_tool
from helix_dbos.runtime.launch import launch, shutdown

AGENT_NAME = "chaos-agent"


class WorkIn(BaseModel):
    step: int


class Answer(BaseModel):
    answer: str


def chaos_agent(llm_base_url: str, effects_file: Path, tool_seconds: float) -> AgentConfig:
    """The agent every worker registers: ``work`` steps, then a structured ``__finish__``."""

    def work(inp: WorkIn, ctx: ToolContext) -> dict[str, int]:
        time.sleep(tool_seconds)
        line = f"{ctx.tool_call_id} {int(time.time() * 1000)}\n"
        fd = os.open(effects_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())  # one write() of a short line under O_APPEND is atomic
        finally:
            os.close(fd)
        return {"done": inp.step}

    return define_agent(
        AGENT_NAME,
        system_prompt="Do the work step by step, then finish.",
        llm_config={"model": "openai/chaos", "api_base": llm_base_url, "api_key": "test", "max_retries": 2},
        tools=[define_tool("work", input_schema=WorkIn, execute=work)],
        output_schema=Answer,
        max_steps=64,
    )


def main() -> None:
    database_url, llm_base_url, effects_dir, executor_id = sys.argv[1:5]
    options = dict(a[2:].split("=", 1) for a in sys.argv[5:] if a.startswith("--") and "=" in a)
    effects = Path(effects_dir) / f"{executor_id}-{os.getpid()}.log"
    agent = chaos_agent(llm_base_url, effects, float(options.get("tool-seconds", "0.3")))
    executor = launch(
        database_url,
        agents=[agent],
        executor_id=executor_id,
        takeover_after_seconds=float(options.get("takeover-after", "5")),
    )
    stop = threading.Event()

    def read_commands() -> None:
        for line in sys.stdin:
            command, _, session_id = line.strip().partition(" ")
            if command == "start":
                try:
                    executor.execute(agent, f"chaos session {session_id}", session_id=session_id)
                except Exception as exc:  # the database may be down: the controller sends it again
                    print(f"failed {session_id} {type(exc).__name__}", flush=True)
                else:
                    print(f"started {session_id}", flush=True)
        stop.set()

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=read_commands, daemon=True).start()
    print("ready", flush=True)
    while not stop.wait(0.2):
        pass
    shutdown(executor)


if __name__ == "__main__":
    main()
