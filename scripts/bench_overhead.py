"""Overhead of helix-dbos over a bare DBOS workflow doing the same steps, on PostgreSQL.

Workload per run: 10 LLM steps and 9 tool calls, with a zero-latency scripted model, so what is
measured is pure engine cost. The bare baseline is one DBOS workflow making the same 19 steps (an
"llm" step returning a dict, a "tool" step returning a dict) and nothing else: no transcript, no
session store, no checkpoints. Both run in this process, against the same database, alternating
in rounds so machine noise hits both alike.

Usage:  python scripts/bench_overhead.py [--runs 60] [--concurrency 8] [--database-url URL]
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbos import DBOS, SetWorkflowID

from helix_dbos import (
    DBOSAgentExecutor,
    LLMGenerateInput,
    ParsedToolCall,
    SqlSessionStore,
    StepResult,
    TextStepResult,
    ToolCallsStepResult,
    define_agent,
    define_tool,
)
from helix_dbos.messages import ToolResultMessage
from scripts._bench_setup import bench_database, configure_dbos

TOOL_CALLS = 9


class ZeroLatencyModel:
    """Calls the tool until it has seen nine results, then answers with text."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        seen = sum(isinstance(m, ToolResultMessage) for m in input.messages)
        if seen < TOOL_CALLS:
            return ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id=f"c{seen}", name="noop", arguments={"i": seen})],
                stop_reason="tool_use",
            )
        return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")


agent = define_agent(
    "bench",
    system_prompt="benchmark",
    llm_config="openai/none",
    tools=[define_tool("noop", execute=lambda inp, ctx: {"ok": True, "i": inp.get("i")})],
    max_steps=20,
)


@DBOS.step(name="bare.llm")
def bare_llm(i: int) -> dict[str, Any]:
    if i < TOOL_CALLS:
        return {"type": "tool_calls", "tool_calls": [{"id": f"c{i}", "name": "noop", "arguments": {"i": i}}]}
    return {"type": "text", "content": "done"}


@DBOS.step(name="bare.tool")
def bare_tool(i: int) -> dict[str, Any]:
    return {"ok": True, "i": i}


@DBOS.workflow(name="bare.agent")
def bare_workflow() -> str:
    for i in range(TOOL_CALLS + 1):
        out = bare_llm(i)
        if out["type"] == "text":
            return str(out["content"])
        bare_tool(i)
    return "unreachable"


def run_helix(executor: DBOSAgentExecutor) -> float:
    started = time.perf_counter()
    result = executor.execute(agent, "go", session_id=f"b-{uuid.uuid4().hex}").result()
    assert result.status == "completed", result
    return (time.perf_counter() - started) * 1000


def run_bare() -> float:
    started = time.perf_counter()
    with SetWorkflowID(f"bare-{uuid.uuid4().hex}"):
        handle = DBOS.start_workflow(bare_workflow)
    assert handle.get_result() == "done"
    return (time.perf_counter() - started) * 1000


def measure(fn: Any, runs: int, concurrency: int) -> list[float]:
    if concurrency == 1:
        return [fn() for _ in range(runs)]
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda _: fn(), range(runs)))


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()

    with bench_database(args.database_url, "bench") as url:
        configure_dbos(url)
        executor = DBOSAgentExecutor(SqlSessionStore(url), llm_adapter=ZeroLatencyModel(), agents=[agent])
        DBOS.launch()
        for _ in range(5):  # warm up both paths
            run_helix(executor)
            run_bare()
        print(
            f"workload: {TOOL_CALLS + 1} LLM steps + {TOOL_CALLS} tool calls per run, "
            f"PostgreSQL at {url.split('@')[-1]}"
        )
        for concurrency in (1, args.concurrency):
            helix: list[float] = []
            bare: list[float] = []
            per_round = max(1, args.runs // args.rounds)
            wall = {"helix": 0.0, "bare": 0.0}
            for _ in range(args.rounds):
                t = time.perf_counter()
                bare += measure(run_bare, per_round, concurrency)
                wall["bare"] += time.perf_counter() - t
                t = time.perf_counter()
                helix += measure(lambda: run_helix(executor), per_round, concurrency)
                wall["helix"] += time.perf_counter() - t
            h_med, h_p95 = summary(helix)
            b_med, b_p95 = summary(bare)
            label = "sequential" if concurrency == 1 else f"{concurrency} concurrent"
            print(f"\n[{label}] {len(helix)} runs each")
            print(
                f"  bare DBOS  : median {b_med:7.1f} ms   p95 {b_p95:7.1f} ms   {len(bare) / wall['bare']:6.1f} runs/s"
            )
            print(
                f"  helix-dbos : median {h_med:7.1f} ms   p95 {h_p95:7.1f} ms   "
                f"{len(helix) / wall['helix']:6.1f} runs/s"
            )
            print(f"  ratio      : median {h_med / b_med:5.2f}x   p95 {h_p95 / b_p95:5.2f}x")
        executor.close()
        DBOS.destroy()


if __name__ == "__main__":
    main()
