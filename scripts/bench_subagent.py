"""Cost of one sub-agent call over a plain tool call, on PostgreSQL (issue 12).

Two parent agents, alike but for their one call: ``plain`` calls a tool (``noop``) then answers;
``delegating`` calls ``subagent__worker`` then answers, where ``worker`` finishes at once (one LLM
step calling ``__finish__``). The model is a zero-latency script, so the difference is pure engine
cost: opening the child's session and run, its DBOS child workflow, its LLM and finalize steps, the
wait, the mirrored stream chunks and the ``subagent_start`` / ``subagent_end`` chunks.

Printed per system (as ``bench_overhead.py`` measures them): latency p50 / mean / p95, throughput,
committed PostgreSQL transactions per run, write transactions and ``COMMIT`` statements per run,
client CPU per run; then the difference per call.

Usage:  python scripts/bench_subagent.py [--runs 40] [--rounds 2] [--concurrency 4] [--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import (
    DBOSAgentExecutor,
    LLMGenerateInput,
    SqlSessionStore,
    StepResult,
    create_sub_agent_tool,
    define_agent,
    define_tool,
)
from helix_dbos.messages import ToolResultMessage
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.stream.sql import SqlStreamManager
from scripts._bench_pg import FLUSH_WAIT_SECONDS, ServerCounters
from scripts._bench_setup import bench_database, configure_dbos
from scripts.bench_overhead import Tally, run_block


class Task(BaseModel):
    task: str


class Done(BaseModel):
    done: bool


class ZeroLatencyModel:
    """``worker`` finishes at once; a parent makes its one call, then answers with text."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        if input.agent_type == "worker":
            return ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id="f", name="__finish__", arguments={"done": True})],
                stop_reason="tool_use",
            )
        if any(isinstance(m, ToolResultMessage) for m in input.messages):
            return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")
        name = "subagent__worker" if input.agent_type == "delegating" else "noop"
        return ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id="c1", name=name, arguments={"task": "x"})], stop_reason="tool_use"
        )


worker = define_agent("worker", system_prompt="work", llm_config="openai/none", output_schema=Done)
plain = define_agent(
    "plain",
    system_prompt="p",
    llm_config="openai/none",
    tools=[define_tool("noop", input_schema=Task, execute=lambda inp, ctx: {"done": True})],
)
delegating = define_agent(
    "delegating", system_prompt="p", llm_config="openai/none", tools=[create_sub_agent_tool(worker, Task)]
)


def run(executor: DBOSAgentExecutor, agent_name: str) -> float:
    started = time.perf_counter()
    result = executor.execute(agent_name, "go", session_id=f"b-{uuid.uuid4().hex}").result()
    assert result.status == "completed" and result.output == "done", result
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--flush-wait", type=float, default=FLUSH_WAIT_SECONDS, help="idle seconds before a snapshot")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()

    with bench_database(args.database_url, "bench_sub") as url:
        configure_dbos(url)
        store = SqlSessionStore(url)
        executor = DBOSAgentExecutor(
            store,
            llm_adapter=ZeroLatencyModel(),
            stream_manager=SqlStreamManager(store.engine),
            agents=[plain, delegating],
        )
        DBOS.launch()
        counters = ServerCounters(url, flush_wait=args.flush_wait)
        for _ in range(5):  # warm up both paths
            run(executor, "plain")
            run(executor, "delegating")
        background = counters.calibrate()
        print(
            "workload: parent = LLM step, one call, LLM step; the sub-agent's child = one LLM step (__finish__); "
            f"durable SQL stream; background {background:.1f} commits/s while idle (subtracted)"
        )
        systems = {"tool call": lambda: run(executor, "plain"), "sub-agent": lambda: run(executor, "delegating")}
        for concurrency in (1, args.concurrency):
            tallies = {name: Tally() for name in systems}
            per_round = max(1, args.runs // args.rounds)
            snap = counters.snapshot()
            for _ in range(args.rounds):
                for name, fn in systems.items():
                    snap = run_block(fn, per_round, concurrency, counters, tallies[name], snap)
            label = "sequential" if concurrency == 1 else f"{concurrency} concurrent"
            print(f"\n[{label}] {per_round * args.rounds} runs each, {args.rounds} alternating rounds")
            for name, tally in tallies.items():
                print(tally.line(name))
            t, s = tallies["tool call"], tallies["sub-agent"]
            runs = len(t.samples)
            print(
                f"  sub-agent call costs: +{statistics.median(s.samples) - statistics.median(t.samples):.1f} ms p50, "
                f"+{(s.commits - t.commits) / runs:.1f} transactions, "
                f"+{(s.statements['COMMIT'] - t.statements['COMMIT']) / runs:.1f} COMMITs, "
                f"+{(s.cpu - t.cpu) / runs * 1000:.1f} ms CPU per call"
            )
        counters.close()
        executor.close()
        DBOS.destroy()


if __name__ == "__main__":
    main()
