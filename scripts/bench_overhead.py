"""Overhead of helix-dbos over a bare DBOS workflow doing the same steps, on PostgreSQL.

Workload per run: 10 LLM steps and 9 tool calls, with a zero-latency scripted model, so what is
measured is pure engine cost. The bare baseline is one DBOS workflow making the same 19 steps (an
"llm" step returning a dict, a "tool" step returning a dict) and nothing else: no transcript, no
session store, no checkpoints. Both run in this process, against the same database, alternating
in rounds so machine noise hits both alike. A third system, the floor (scripts/_bench_floor.py), is
the bare workflow plus the least durable bookkeeping the contract needs (the run's row, each model
call's transcript messages, checkpoint, usage and stream chunks in one hand-written statement, the
run's end): ``floor / bare`` is the contract's price, ``helix / floor`` is helix-dbos's own code.
helix-dbos runs with the durable SQL stream, as ``helix_dbos.launch`` configures it (``--stream
memory`` for the in-memory one, which the issue's first 1.94x figure used).

For each system it prints latency (p50, mean, p95), throughput, committed PostgreSQL transactions
per run (``pg_stat_database.xact_commit``, read after the pools sit idle long enough for every
backend to flush its counters; see scripts/_bench_pg.py; it includes SQLAlchemy's pre-ping round
trips, each its own transaction), write transactions per run (the transaction-id horizon), explicit
``COMMIT`` statements per run (pg_stat_statements: exact, no pings, no background) and client CPU
per run (``time.process_time``: every thread of this
process, DBOS's and helix-dbos's background threads included). ``--statements N`` adds the N most
called statements per run of each system (pg_stat_statements, preloaded on the throw-away cluster).

Usage:  python scripts/bench_overhead.py [--runs 40] [--rounds 2] [--concurrency 8] [--statements 40]
        [--flush-wait 11] [--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbos import DBOS, SetWorkflowID

from helix_dbos import DBOSAgentExecutor, LLMGenerateInput, SqlSessionStore, StepResult, define_agent, define_tool
from helix_dbos.messages import ToolResultMessage
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.stream.sql import SqlStreamManager
from scripts import _bench_floor
from scripts._bench_pg import FLUSH_WAIT_SECONDS, ServerCounters, Snapshot
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


def make_executor(url: str, stream: str, stream_delay: float | None = None) -> DBOSAgentExecutor:
    """The executor as ``helix_dbos.launch`` builds it (durable stream), or with an in-memory stream.

    ``stream_delay`` overrides the durable stream's ``batch_max_delay`` (the least time between two
    flushes), to measure what batching more chunks per transaction buys.
    """
    store = SqlSessionStore(url)
    manager = None
    if stream == "sql":
        manager = (
            SqlStreamManager(store.engine)
            if stream_delay is None
            else SqlStreamManager(store.engine, batch_max_delay=stream_delay)
        )
    return DBOSAgentExecutor(store, llm_adapter=ZeroLatencyModel(), stream_manager=manager, agents=[agent])


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


@dataclass
class Tally:
    """What one system cost over the measured blocks of one concurrency level."""

    samples: list[float] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0
    commits: float = 0.0
    writes: int = 0
    statements: Counter[str] = field(default_factory=Counter)

    def line(self, name: str) -> str:
        runs = len(self.samples)
        ordered = sorted(self.samples)
        p95 = ordered[min(runs - 1, int(0.95 * runs))]
        return (
            f"  {name:10s}: p50 {statistics.median(ordered):6.1f} ms  mean {statistics.fmean(ordered):6.1f} ms  "
            f"p95 {p95:6.1f} ms  {runs / self.wall:5.1f} runs/s  | xacts/run {self.commits / runs:6.1f}  "
            f"writes/run {self.writes / runs:5.1f}  COMMITs/run {self.statements['COMMIT'] / runs:5.1f}  "
            f"| CPU/run {self.cpu / runs * 1000:5.1f} ms"
        )


def run_block(
    fn: Any, runs: int, concurrency: int, counters: ServerCounters, tally: Tally, before: Snapshot
) -> Snapshot:
    """One measured block; returns the snapshot after it (taken after the idle wait)."""
    counters.reset_statements()
    cpu, wall = time.process_time(), time.perf_counter()
    tally.samples += measure(fn, runs, concurrency)
    tally.wall += time.perf_counter() - wall
    tally.cpu += time.process_time() - cpu
    for counted in counters.statement_counts():
        tally.statements[counted.query] += counted.calls
    after = counters.snapshot()
    tally.commits += counters.commits_between(before, after)
    tally.writes += after.xid_horizon - before.xid_horizon
    return after


def ratio_line(label: str, a: Tally, b: Tally) -> str:
    return (
        f"  {label:11s}: p50 {statistics.median(a.samples) / statistics.median(b.samples):5.2f}x  "
        f"mean {statistics.fmean(a.samples) / statistics.fmean(b.samples):5.2f}x  "
        f"xacts {a.commits / max(b.commits, 1):5.2f}x  CPU {a.cpu / max(b.cpu, 1e-9):5.2f}x"
    )


def print_statements(name: str, tally: Tally, top: int) -> None:
    runs = len(tally.samples)
    total = sum(tally.statements.values())
    print(f"  statements per run, {name} ({total / runs:.1f} in all):")
    for query, calls in tally.statements.most_common(top):
        print(f"    {calls / runs:6.2f}  {' '.join(query.split())[:150]}")


def observed(run: Any) -> Any:
    """``run`` with helix-dbos's tracing and lifecycle logs on while any call of it is in flight.

    Spans go through the SDK's batch processor to an exporter that drops them (the cost of making
    and queueing spans, not of a network); lifecycle records are formatted and written to /dev/null.
    Switched on and off around each block of calls, so the other systems' runs stay unobserved.
    """
    import logging
    import os
    import threading

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from helix_dbos.observability import instrument

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    lifecycle = logging.getLogger("helix_dbos.lifecycle")
    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the benchmark
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    lifecycle.addHandler(handler)
    lifecycle.propagate = False
    lock, in_flight = threading.Lock(), [0]

    def wrapped() -> Any:
        with lock:
            in_flight[0] += 1
            if in_flight[0] == 1:
                instrument(provider)
                lifecycle.setLevel(logging.INFO)
        try:
            return run()
        finally:
            with lock:
                in_flight[0] -= 1
                if in_flight[0] == 0:
                    instrument(None)
                    lifecycle.setLevel(logging.WARNING)

    lifecycle.setLevel(logging.WARNING)
    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--flush-wait", type=float, default=FLUSH_WAIT_SECONDS, help="idle seconds before a snapshot")
    parser.add_argument("--statements", type=int, default=0, help="print the N most called statements per system")
    parser.add_argument(
        "--stream", choices=("sql", "memory"), default="sql", help="helix-dbos's stream manager (launch() uses sql)"
    )
    parser.add_argument("--stream-delay", type=float, default=None, help="the durable stream's batch_max_delay")
    parser.add_argument("--database-url", default=None)
    parser.add_argument(
        "--observe",
        action="store_true",
        help="also run helix-dbos traced (SDK provider, batch processor, discarding exporter), lifecycle logs on",
    )
    args = parser.parse_args()

    with bench_database(args.database_url, "bench") as url:
        configure_dbos(url)
        executor = make_executor(url, args.stream, args.stream_delay)
        _bench_floor.install(url)
        DBOS.launch()
        counters = ServerCounters(url, flush_wait=args.flush_wait)
        for _ in range(5):  # warm up every path
            run_helix(executor)
            run_bare()
            _bench_floor.run_floor()
        background = counters.calibrate()
        print(
            f"workload: {TOOL_CALLS + 1} LLM steps + {TOOL_CALLS} tool calls per run, "
            f"PostgreSQL at {url.split('@')[-1]}; helix-dbos with the {args.stream} stream; "
            f"background {background:.1f} commits/s while idle (subtracted)"
        )
        systems = {"bare DBOS": run_bare, "floor": _bench_floor.run_floor, "helix-dbos": lambda: run_helix(executor)}
        if args.observe:
            systems["helix-dbos observed"] = observed(lambda: run_helix(executor))
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
            h, f, b = tallies["helix-dbos"], tallies["floor"], tallies["bare DBOS"]
            print(ratio_line("helix/bare", h, b))
            print(ratio_line("floor/bare", f, b))
            print(ratio_line("helix/floor", h, f))
            if args.observe:
                o = tallies["helix-dbos observed"]
                print(
                    f"  observed/unobserved: p50 {statistics.median(o.samples) / statistics.median(h.samples):5.2f}x  "
                    f"CPU/run {o.cpu / len(o.samples) * 1000:5.1f} vs {h.cpu / len(h.samples) * 1000:5.1f} ms"
                )
            if args.statements:
                for name, tally in tallies.items():
                    print_statements(name, tally, args.statements)
        counters.close()
        _bench_floor.close()
        executor.close()
        DBOS.destroy()


if __name__ == "__main__":
    main()
