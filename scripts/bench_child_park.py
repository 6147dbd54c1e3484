"""A parent waiting on a sub-agent: threads held and wake latency, hot wait vs parking (issue 32).

N parents start at once; each delegates one call to a ``worker`` child whose tool takes
``--child-seconds``. Two systems, one after the other on the same database:

- ``hot``: a hot window longer than the child (60 s): each parent waits in its ``child.wait`` step;
- ``parked``: a short hot window (``--hot-window``): each parent parks as
  ``suspended_awaiting_children`` and the child's end continues it.

Printed per system: the threads inside parent runs half-way through the children's work (sampled
from the interpreter's frames), the wall time until every parent completed, and for ``parked`` the
wake latency: from the child's run ending (its ``completed_at``) to the parent's continuation run
starting (its ``started_at``), both stamped by the store, p50 / p95 / max.

``--nested``: each parent delegates to a ``middle`` agent, which delegates to the ``worker``; in
``parked`` both the middle child and the parent park, and the wake latency is the parent's: from
the middle child's continuation ending to the parent's continuation starting (a middle child's
continuation is its parent's child, so its end wakes the parent as a first-level child's does).

Usage:  python scripts/bench_child_park.py [--parents 30] [--child-seconds 3.0] [--hot-window 0.2] [--nested]
        [--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import (
    DBOSAgentExecutor,
    LLMGenerateInput,
    SqlSessionStore,
    StepResult,
    ToolContext,
    create_sub_agent_tool,
    define_agent,
    define_tool,
)
from helix_dbos.messages import ToolResultMessage
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from scripts._bench_setup import bench_database, configure_dbos
from tests.run_probes import threads_in_runs


class Task(BaseModel):
    task: str


class Done(BaseModel):
    done: bool


CHILD_SECONDS = [1.0]


def slow_work(args: Task, ctx: ToolContext) -> str:
    time.sleep(CHILD_SECONDS[0])
    return "worked"


class ZeroLatencyModel:
    """The child calls its slow tool then finishes; a parent delegates once, then answers with text."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        seen_result = any(isinstance(m, ToolResultMessage) for m in input.messages)
        if input.agent_type == "worker":
            if seen_result:
                return ToolCallsStepResult(
                    tool_calls=[ParsedToolCall(id="f", name="__finish__", arguments={"done": True})],
                    stop_reason="tool_use",
                )
            return ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id="w", name="slow_work", arguments={"task": "x"})], stop_reason="tool_use"
            )
        if input.agent_type == "middle" and seen_result:
            return ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id="f", name="__finish__", arguments={"done": True})],
                stop_reason="tool_use",
            )
        if seen_result:
            return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")
        child = "worker" if input.agent_type == "middle" or not NESTED[0] else "middle"
        return ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id="c1", name=f"subagent__{child}", arguments={"task": "x"})],
            stop_reason="tool_use",
        )


worker = define_agent(
    "worker",
    system_prompt="work",
    llm_config="openai/none",
    output_schema=Done,
    tools=[define_tool("slow_work", input_schema=Task, execute=slow_work)],
)
middle = define_agent(
    "middle",
    system_prompt="m",
    llm_config="openai/none",
    output_schema=Done,
    tools=[create_sub_agent_tool(worker, Task)],
)
parent = define_agent(
    "parent", system_prompt="p", llm_config="openai/none", tools=[create_sub_agent_tool(worker, Task)]
)
nested_parent = define_agent(
    "parent", system_prompt="p", llm_config="openai/none", tools=[create_sub_agent_tool(middle, Task)]
)
NESTED = [False]


def run_system(url: str, parents: int, hot_window: float) -> tuple[int, float, list[float], int]:
    """(parent threads half-way, seconds until all completed, wake latencies in ms, parents never continued).

    A parent still active 30 s after the children's work should have ended is counted as never
    continued (no sweep runs here: only a wake can continue it).
    """
    store = SqlSessionStore(url)
    top = nested_parent if NESTED[0] else parent
    executor = DBOSAgentExecutor(store, llm_adapter=ZeroLatencyModel(), agents=[top], hot_window_seconds=hot_window)
    try:
        sessions = [f"park-{uuid.uuid4().hex}" for _ in range(parents)]
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda s: executor.execute("parent", "go", session_id=s), sessions))
        time.sleep(CHILD_SECONDS[0] / 2)  # the children are half-way (the short window long past)
        held = threads_in_runs(lambda request: request.agent_name == "parent")
        give_up, stuck = time.monotonic() + CHILD_SECONDS[0] + 30, 0
        for session_id in sessions:
            while (session := store.load_session(session_id)) is None or session.status == "active":
                if time.monotonic() > give_up:
                    stuck += 1
                    break
                time.sleep(0.01)
            else:
                assert session.status == "completed", session
        wall = time.monotonic() - started
        latencies = []
        for session_id in sessions:
            runs = store.list_runs(session_id)
            if len(runs) < 2:
                continue
            child = store.get_current_run(f"{session_id}-sub-1.1-c1")  # the middle child's last run, if nested
            assert child is not None and child.completed_at is not None
            latencies.append(float(runs[1].started_at - child.completed_at))
        return held, wall, latencies, stuck
    finally:
        executor.close()
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parents", type=int, default=30)
    parser.add_argument("--child-seconds", type=float, default=3.0)
    parser.add_argument("--hot-window", type=float, default=0.2)
    parser.add_argument("--nested", action="store_true")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    CHILD_SECONDS[0] = args.child_seconds
    NESTED[0] = args.nested

    with bench_database(args.database_url, "bench_park") as url:
        configure_dbos(url)
        DBOS.launch()
        run_system(url, 2, 60.0)  # warm up
        print(
            f"workload: {args.parents} parents at once, each delegating one child whose tool takes "
            f"{args.child_seconds:.1f} s{' through a middle child' if args.nested else ''}; PostgreSQL; "
            "no workers' sweep (the child's own wake continues a parent)"
        )
        print(
            f"{'system':<28}{'parent threads half-way':>26}{'all completed (s)':>20}{'wake p50/p95/max (ms)':>26}"
            f"{'never continued':>17}"
        )
        for name, window in (("hot (window 60 s)", 60.0), (f"parked (window {args.hot_window} s)", args.hot_window)):
            held, wall, latencies, stuck = run_system(url, args.parents, window)
            wake = "-"
            if latencies:
                ordered = sorted(latencies)
                p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
                wake = f"{statistics.median(ordered):.0f} / {p95:.0f} / {ordered[-1]:.0f} (n={len(ordered)})"
            print(f"{name:<28}{held:>26}{wall:>20.2f}{wake:>26}{stuck:>17}")
        DBOS.destroy()


if __name__ == "__main__":
    main()
