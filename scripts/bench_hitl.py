"""Human-in-the-loop latency and the cost of parked runs, on PostgreSQL.

Prints:
- submission latency, hot path: ``submit_tool_result`` called -> the tool result is committed to
  the transcript (observed when the model is next called: the LLM step commits the transcript just
  before it calls the model), for a run blocked in ``DBOS.recv``;
- the same for the parked path, where the submission starts the continuation run;
- for the hot path, the client CPU (``time.process_time``, every thread) from the submission to the
  run's result, and with ``--statements N`` the N most frequent statements of that stretch;
- memory (RSS) and thread count of this process with N runs waiting hot, and with N runs parked,
  and for N parked runs the throughput, CPU and committed PostgreSQL transactions per run of
  parking them (start -> suspended) and of answering them (submission -> completed).

Usage: python scripts/bench_hitl.py [--runs 1000] [--samples 30] [--statements 0] [--flush-wait 11]
       [--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import (
    DBOSAgentExecutor,
    LLMGenerateInput,
    SqlSessionStore,
    StepResult,
    ToolResultMessage,
    define_agent,
    define_tool,
)
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from scripts._bench_pg import FLUSH_WAIT_SECONDS, ServerCounters
from scripts._bench_setup import bench_database, configure_dbos


class AskIn(BaseModel):
    question: str


seen_at: dict[str, float] = {}


class Model:
    """Asks the client once, then stops; records when it first sees the client's answer."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        if not any(isinstance(m, ToolResultMessage) for m in input.messages):
            return ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id="ask", name="ask_user", arguments={"question": "ok?"})],
                stop_reason="tool_use",
            )
        seen_at.setdefault(input.session_id or "", time.perf_counter())
        return TextStepResult(content="thanks", should_stop=True, stop_reason="end_turn")


agent = define_agent(
    "hitl-bench",
    system_prompt="bench",
    llm_config="openai/none",
    tools=[define_tool("ask_user", input_schema=AskIn, execute="client")],
)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def wait_open(executor: DBOSAgentExecutor, session_id: str) -> None:
    while not executor.store.pending.open_calls(session_id):
        time.sleep(0.002)


def wait_status(executor: DBOSAgentExecutor, session_id: str, status: str) -> None:
    while True:
        run = executor.store.get_current_run(session_id)
        if run is not None and run.status == status:
            return
        time.sleep(0.005)


def submit(executor: DBOSAgentExecutor, session_id: str) -> float:
    started = time.perf_counter()
    executor.submit_tool_result(session_id, {"kind": "client-tool-result", "tool_call_id": "ask", "result": "yes"})
    while session_id not in seen_at:
        time.sleep(0.0005)
    return (seen_at[session_id] - started) * 1000


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(label: str, samples: list[float]) -> None:
    print(f"{label}: p50 {statistics.median(samples):6.1f} ms   p95 {pct(samples, 0.95):6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--statements", type=int, default=0, help="print the N most frequent hot-path statements")
    parser.add_argument("--flush-wait", type=float, default=FLUSH_WAIT_SECONDS, help="idle seconds before a snapshot")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with bench_database(args.database_url, "hitl") as url:
        configure_dbos(url)
        # As launch() builds it on PostgreSQL: DBOS shares the store's database, so a submission
        # wakes a hot run in its own transaction.
        executor = DBOSAgentExecutor(
            SqlSessionStore(url), llm_adapter=Model(), agents=[agent], hot_window_seconds=3600, wake_in_submission=True
        )
        DBOS.launch()
        print(f"PostgreSQL at {url.split('@')[-1]}")

        counters = ServerCounters(url, flush_wait=args.flush_wait)
        counters.calibrate()
        hot: list[float] = []
        hot_cpu = 0.0
        statements: Counter[str] = Counter()
        for _ in range(args.samples):
            sid = f"hot-{uuid.uuid4().hex}"
            handle = executor.execute(agent, "go", session_id=sid)
            wait_open(executor, sid)
            time.sleep(0.05)  # let the run settle into recv
            counters.reset_statements()
            cpu = time.process_time()
            hot.append(submit(executor, sid))
            handle.result()
            hot_cpu += time.process_time() - cpu
            for counted in counters.statement_counts():
                statements[counted.query] += counted.calls
        report("hot submission    -> tool result in transcript", hot)
        print(f"  CPU from submission to result: {hot_cpu / args.samples * 1000:5.1f} ms per run")
        if args.statements:
            print(f"  statements from submission to result, per run ({sum(statements.values()) / args.samples:.1f}):")
            for query, calls in statements.most_common(args.statements):
                print(f"    {calls / args.samples:6.2f}  {' '.join(query.split())[:150]}")

        executor._services.hot_window_seconds = 0.05  # park right away for this part
        parked: list[float] = []
        for _ in range(args.samples):
            sid = f"parked-{uuid.uuid4().hex}"
            executor.execute(agent, "go", session_id=sid).result()  # returns once parked
            parked.append(submit(executor, sid))
            wait_status(executor, sid, "completed")
        report("parked submission -> tool result in transcript", parked)

        base_rss, base_threads = rss_mb(), threading.active_count()
        print(f"\nbaseline after warm-up: RSS {base_rss:7.1f} MB, threads {base_threads}")
        for mode, window in (("parked (workflow ended)", 0.05), ("hot (blocked in DBOS.recv)", 3600.0)):
            executor._services.hot_window_seconds = window
            ids = [f"many-{uuid.uuid4().hex}" for _ in range(args.runs)]
            before = counters.snapshot()
            started, cpu = time.perf_counter(), time.process_time()
            for sid in ids:
                executor.execute(agent, "go", session_id=sid)
            for sid in ids:
                wait_open(executor, sid)
                if window < 1:
                    wait_status(executor, sid, "suspended")
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            time.sleep(1.0)
            rss, threads = rss_mb(), threading.active_count()
            print(
                f"{args.runs} runs {mode:27s}: RSS {rss:7.1f} MB (+{rss - base_rss:6.1f}), "
                f"threads {threads} (+{threads - base_threads})   [all waiting after {elapsed:5.1f} s]"
            )
            parked = counters.snapshot()
            answered, answer_cpu = time.perf_counter(), time.process_time()
            for sid in ids:  # answer them all, so the next measurement starts clean
                executor.submit_tool_result(sid, {"kind": "client-tool-result", "tool_call_id": "ask", "result": "y"})
            for sid in ids:
                wait_status(executor, sid, "completed")
            answered, answer_cpu = time.perf_counter() - answered, time.process_time() - answer_cpu
            done = counters.snapshot()
            if window < 1:
                print(
                    f"  parking   : {args.runs / elapsed:6.1f} runs/s  CPU {cpu / args.runs * 1000:5.1f} ms/run  "
                    f"xacts {counters.commits_between(before, parked) / args.runs:5.1f}/run (RSS wait included)\n"
                    f"  answering : {args.runs / answered:6.1f} runs/s  "
                    f"CPU {answer_cpu / args.runs * 1000:5.1f} ms/run  "
                    f"xacts {counters.commits_between(parked, done) / args.runs:5.1f}/run (submission -> completed)"
                )
        counters.close()
        executor.close()
        DBOS.destroy()


if __name__ == "__main__":
    main()
