"""What declaring a tool ``retry_safe=False`` costs a healthy run, on PostgreSQL.

A not-retry-safe call is preceded by one ``{agent}.tool_starts`` step (its crash marker) and one
``DBOS.patch`` row per phase that has such a call. This runs the same agent (one tool call per
step, ``--calls`` steps) with the tool retry-safe and with it not, in alternating rounds of
sequential runs, and prints side by side the median and p90 wall time per run, the time per tool
call, and the DBOS steps each run records.

Usage: python scripts/bench_unsafe_tools.py [--runs 40] [--rounds 4] [--calls 5] [--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbos import DBOS

from helix_dbos import (
    AgentConfig,
    DBOSAgentExecutor,
    LLMGenerateInput,
    SqlSessionStore,
    StepResult,
    define_agent,
    define_tool,
)
from helix_dbos.messages import ToolResultMessage
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from scripts._bench_setup import bench_database, configure_dbos


class Model:
    """Calls ``pay`` until it has seen ``calls`` results, then answers with text."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        seen = sum(isinstance(m, ToolResultMessage) for m in input.messages)
        if seen < self.calls:
            return ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id=f"c{seen}", name="pay", arguments={})], stop_reason="tool_use"
            )
        return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")


def _agent(name: str, retry_safe: bool) -> AgentConfig:
    pay = define_tool("pay", execute=lambda inp, ctx: {"paid": True}, retry_safe=retry_safe)
    return define_agent(name, system_prompt="bench", llm_config="openai/none", tools=[pay], max_steps=50)


def _run(executor: DBOSAgentExecutor, agent: AgentConfig) -> tuple[float, str]:
    started = time.perf_counter()
    handle = executor.execute(agent, "go", session_id=f"b-{uuid.uuid4().hex}")
    result = handle.result()
    assert result.status == "completed", result
    return (time.perf_counter() - started) * 1000, handle.run_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40, help="runs per variant, over all rounds")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=5, help="tool calls per run (one per model step)")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()

    with bench_database(args.database_url, "bench_unsafe") as url:
        configure_dbos(url)
        variants = {"retry-safe": _agent("bench-safe", True), "retry_safe=False": _agent("bench-unsafe", False)}
        executor = DBOSAgentExecutor(
            SqlSessionStore(url), llm_adapter=Model(args.calls), agents=list(variants.values())
        )
        DBOS.launch()
        for agent in variants.values():  # warm up both paths
            for _ in range(3):
                _run(executor, agent)
        times: dict[str, list[float]] = {name: [] for name in variants}
        last_run: dict[str, str] = {}
        per_round = max(1, args.runs // args.rounds)
        for _ in range(args.rounds):
            for name, agent in variants.items():
                for _ in range(per_round):
                    elapsed, last_run[name] = _run(executor, agent)
                    times[name].append(elapsed)
        print(
            f"{per_round * args.rounds} sequential runs per variant, {args.rounds} alternating rounds, "
            f"{args.calls} tool calls per run, PostgreSQL at {url.split('@')[-1]}"
        )
        print(f"{'tool':<18}{'median ms/run':>15}{'p90 ms/run':>12}{'ms/tool call':>14}{'steps/run':>11}")
        medians: dict[str, float] = {}
        for name, samples in times.items():
            samples.sort()
            medians[name] = statistics.median(samples)
            p90 = samples[int(0.9 * (len(samples) - 1))]
            steps: list[Any] = DBOS.list_workflow_steps(last_run[name])
            print(f"{name:<18}{medians[name]:>15.1f}{p90:>12.1f}{medians[name] / args.calls:>14.2f}{len(steps):>11}")
        extra = medians["retry_safe=False"] - medians["retry-safe"]
        print(f"difference: {extra:+.1f} ms per run, {extra / args.calls:+.2f} ms per not-retry-safe call")
        DBOS.destroy()
        executor.store.close()


if __name__ == "__main__":
    main()
