"""A real worker process for the crash-recovery tests: launch helix-dbos on PostgreSQL, maybe start
a run, and wait for the session to finish. The tests SIGKILL it mid-run and start it again.

Tools write their side effects to a file so the test can count them across processes:
``append_line`` appends one line; ``slow_append`` writes a ``start`` marker, sleeps, then appends;
``submit`` (a finish_with tool) does the same before returning the final answer.

With ``--hitl`` the agent instead asks the client for its location (a client-executed tool) and
finishes with the answer; the test submits that answer from its own process.

``--legacy-hitl-steps`` records the HITL steps the way versions before checks could park did, so
a test can recover such a history with the current code.

Launching, starting and waiting for the session are ``tests/worker_harness.py``'s.

``--executor-id=ID`` and ``--takeover-after=SECONDS`` run it as one of several workers that take
over the runs of a worker whose heartbeat stopped.

``--fallback`` puts the agent on a model chain (``openai/primary``, then ``openai/backup``).

``--compaction`` runs an agent with a summarising compaction policy over many tool turns
(``--no-compaction-policy``: the same agent before it had one).

Usage: python crash_worker.py DATABASE_URL LLM_BASE_URL SIDE_EFFECT_FILE SESSION_ID [--start] [--hitl]
       [--fallback] [--legacy-hitl-steps] [--executor-id=ID] [--takeover-after=SECONDS]
"""

from __future__ import annotations

import sys
import time

from pydantic import BaseModel

from helix_dbos import define_agent, define_tool
from tests.worker_harness import append_line, serve_session

DATABASE_URL, LLM_BASE_URL, SIDE_EFFECTS, SESSION_ID = sys.argv[1:5]
START = "--start" in sys.argv
HITL = "--hitl" in sys.argv
OPTIONS = dict(a[2:].split("=", 1) for a in sys.argv if a.startswith("--") and "=" in a)
SLOW_SECONDS = 1.5


def _write(line: str) -> None:
    append_line(SIDE_EFFECTS, line)


class LineIn(BaseModel):
    text: str


class Answer(BaseModel):
    answer: str


def append_line_tool(inp: LineIn, ctx: object) -> dict[str, str]:
    _write(f"append:{inp.text}")
    return {"appended": inp.text}


def slow_append(inp: LineIn, ctx: object) -> dict[str, str]:
    _write(f"start:{inp.text}")
    time.sleep(SLOW_SECONDS)
    _write(f"append:{inp.text}")
    return {"appended": inp.text}


def submit(inp: Answer, ctx: object) -> dict[str, str]:
    _write(f"start:submit:{inp.answer}")
    time.sleep(SLOW_SECONDS)
    _write(f"submit:{inp.answer}")
    return {"answer": inp.answer}


agent = define_agent(
    "crash-agent",
    system_prompt="You append lines, then submit.",
    llm_config={"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0},
    tools=[
        define_tool("append_line", input_schema=LineIn, execute=append_line_tool),
        define_tool("slow_append", input_schema=LineIn, execute=slow_append),
        define_tool("submit", input_schema=Answer, execute=submit, finish_with=True),
    ],
    output_schema=Answer,
    max_steps=10,
)

if "--legacy-hitl-steps" in sys.argv:
    # Record the HITL steps as versions before checks could park did: a registration without its
    # first check, checks without ``parked`` (see ``helix_dbos.runtime.hitl.await_answers``).
    from helix_dbos.runtime import hitl, hitl_capability

    new_check, new_register = hitl.check_step, hitl.register_step

    def legacy_check(*args: object, **_new_options: object) -> object:
        out = dict(new_check(*args[:2]))  # type: ignore[arg-type]
        out.pop("parked")
        return out

    def legacy_register(*args: object) -> object:
        out = dict(new_register(*args))  # type: ignore[arg-type]
        out.pop("check")
        out.pop("answers_in_wakes")  # nor did it take answers from wake-ups
        return out

    hitl.check_step = legacy_check  # type: ignore[assignment]
    hitl_capability.check_step = legacy_check  # type: ignore[assignment]
    hitl_capability.register_step = legacy_register  # type: ignore[assignment]

if "--fallback" in sys.argv:
    # The same agent on a model chain: "primary" (which the test's server fails), then "backup".
    agent = define_agent(
        "fallback-crash-agent",
        system_prompt=agent.system_prompt,
        llm_config={
            "model": "openai/primary",
            "fallbacks": ["openai/backup"],
            "api_base": LLM_BASE_URL,
            "api_key": "test",
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.05, "max_backoff_seconds": 0.05},
        },
        tools=agent.tools,
        output_schema=Answer,
        max_steps=10,
    )

if HITL:
    from tests.runtime.crash_agents import hitl_agent

    agent = hitl_agent(LLM_BASE_URL)
if "--compaction" in sys.argv:
    from tests.runtime.crash_agents import compaction_agent

    agent = compaction_agent(LLM_BASE_URL, with_policy="--no-compaction-policy" not in sys.argv)
if "--text" in sys.argv:
    from tests.runtime.crash_agents import text_agent

    agent = text_agent(LLM_BASE_URL)

serve_session(
    DATABASE_URL,
    [agent],
    SESSION_ID,
    executor_id=OPTIONS.get("executor-id", "crash-worker-hitl" if HITL else "crash-worker"),
    start="go" if START else None,
    poll_seconds=0.1,
    takeover_after_seconds=float(OPTIONS.get("takeover-after", "30")),
)
