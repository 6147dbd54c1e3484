"""Capacity: many agent runs at once on one process, helix-dbos beside the bare DBOS engines under it.

The load of issue 32: ``--runs`` runs (default 200) started at once, each 10 model calls of
``--latency`` seconds (an in-process model that sleeps) and 9 instant tool calls, so the ideal is
every run done in ``10 x latency`` and ``runs / (10 x latency)`` runs per second. The stacks:

- ``bare-sync``: a sync DBOS workflow making 19 sync steps (the model step sleeps in its thread);
- ``bare-async``: an async DBOS workflow making 19 async steps (the model step awaits a sleep);
- ``helix``: helix-dbos as ``launch()`` builds it on PostgreSQL (durable stream), with an async model;
- ``floor``: bare-sync plus the least durable bookkeeping helix-dbos's contract needs
  (``scripts/_bench_floor.py``): the yardstick of what any engine keeping a transcript pays;
- ``helix-pre-ping`` (not in the default set): helix-dbos with DBOS's own system-database engine
  settings, i.e. without what ``launch()`` changes there (``SYSTEM_DATABASE_ENGINE_KWARGS``);
- ``bare-hop`` (not in the default set): bare-sync whose model step awaits its sleep on helix-dbos's
  background event loop, the hop helix-dbos's sync LLM step makes to an async model.

The bare stacks and the floor run with DBOS's own engine settings, as a user of bare DBOS gets them.

Each stack runs in its own child process (so peak RSS, peak threads and CPU are that stack's),
one after the other, alternated over ``--rounds`` rounds, on the same throw-away PostgreSQL
(``tests/pg.py``), whose figures are medians over the rounds. A child launches its stack, warms it
up, measures ``--sequential`` runs one at a time with an instant model (the sequential latency),
then the load. It prints, per stack: runs per second, latency over the ideal (p50 / p99, each run
from its start call to its workflow's completion as DBOS recorded it), client CPU per run (every
thread of the child), PostgreSQL's CPU per run (every server process, from ``/proc``, its idle
rate subtracted: on one machine the two share the cores, so runs per second follow their sum),
committed PostgreSQL transactions and written rows (inserted + updated +
deleted) per run from ``pg_stat_database`` (read after an idle wait so every backend has flushed
its counters, the child's idle rate subtracted: see scripts/_bench_pg.py), peak RSS and peak
threads; then helix-dbos's ratios to each bare engine and the targets of issue 32, pass or fail.

``--simultaneous N`` starts the runs from N client threads at once instead of one after the other
(a one-at-a-time client starts 7-10 runs a second under this load, so only a fraction of the runs is
ever in flight together), and ``--queue SPEC`` runs helix-dbos with a run queue
(``RunQueue.parse``, e.g. ``helix-runs:worker_concurrency=200``) and ``--rate-limit SPEC`` behind a
provider limit on its model (``ProviderRateLimit.parse``, e.g. ``openai/:concurrency=20``). Each
stack also prints the peak of runs in flight at once (from DBOS's start, or dequeue, and end
times), the peak of the database's connections (``pg_stat_activity``, sampled), the pool-wait
warnings logged, the failed runs, and the part of the client's CPU spent in the kernel with the
context switches of its threads (``getrusage``): GIL hand-offs between threads cost both.

Usage:  python scripts/bench_capacity.py [--runs 200] [--latency 1.0] [--rounds 2] [--sequential 20]
        [--stacks bare-sync,bare-async,helix,floor] [--flush-wait 11] [--database-url URL]
        [--simultaneous 0] [--queue SPEC] [--rate-limit SPEC] [--threads N] [--idle S]
        [--trees PATH ...]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster.
``--flush-wait 0`` skips the idle waits (quick, but the transaction counts are then approximate).
``--threads N`` prints each stack's client CPU per run by thread kind (``_bench_threads.py``), top N,
and ``--idle S`` then what each kind of thread costs a second in S idle seconds after the load.

``--trees OLD NEW ...`` measures the ``helix`` stack once per checkout of helix-dbos: each tree's
child imports the ``helix_dbos`` package from that tree (and says which file it imported), the
stacks alternate over the rounds on one PostgreSQL as always, and each later tree is printed
against the first. It is how a lever is measured old against new in one run:
``git worktree add ../old main`` then ``--stacks helix --trees ../old .``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts._bench_threads import ThreadCpu  # noqa: E402 (after the path it needs)
from scripts._capacity_report import (  # noqa: E402 (after the path it needs)
    HEADER,
    Figures,
    measured_stacks,
    print_in_flight,
    print_profiles,
    print_statements,
    print_threads,
    print_trees,
    ratios,
    targets,
)

MODEL_CALLS = 10
TOOL_CALLS = MODEL_CALLS - 1
STACKS = ("bare-sync", "bare-async", "helix", "floor", "helix-pre-ping", "bare-hop")
RESULT_PREFIX = "CAPACITY-RESULT "


# -- the child: one stack ------------------------------------------------------------------------


class Clock:
    """The model latency, switched off for the warm-up and the sequential runs."""

    seconds = 0.0


class ThreadPeak:
    """Samples the process's OS thread count (``/proc/self/status``) every 20 ms; keeps the peak."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="thread-peak")
        self._thread.start()

    @staticmethod
    def now() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
        return threading.active_count()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.now())

    def reset(self) -> None:
        self.peak = self.now()

    def stop(self) -> None:
        self._stop.set()


class WorkflowThreads:
    """Samples, every 0.25 s, how many threads are executing a DBOS workflow; keeps the peak and the mean.

    A thread is counted when its stack holds DBOS's workflow body (``_execute_workflow_wthread``):
    what a run in flight costs in threads, unlike the process's thread count, which keeps the idle
    threads DBOS's executor pool once grew. A run parked for admission is in flight and holds none.
    """

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="workflow-threads")
        self._thread.start()

    @staticmethod
    def now() -> int:
        busy = 0
        for frame in sys._current_frames().values():
            walked: Any = frame
            while walked is not None and walked.f_code.co_name != "_execute_workflow_wthread":
                walked = walked.f_back
            busy += walked is not None
        return busy

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            self.samples.append(self.now())

    def stop(self) -> tuple[int, float]:
        """The peak and the mean of the samples."""
        self._stop.set()
        self._thread.join(timeout=5)
        return max(self.samples, default=0), statistics.fmean(self.samples) if self.samples else 0.0


@dataclass
class Stack:
    """One stack in its child: start one run (returns its workflow id), wait for it, stop the stack."""

    start: Callable[[], str]
    wait: Callable[[str], None]
    close: Callable[[], None]


def bare_sync_stack(url: str, *, hop: bool = False) -> Stack:
    """``hop``: the model step awaits its sleep on helix-dbos's background event loop, as helix-dbos's
    sync LLM step awaits an async model there: what that hop costs bare DBOS (the ``bare-hop`` stack)."""
    from dbos import DBOS, SetWorkflowID

    from scripts._bench_setup import configure_dbos

    wait_on_loop: Callable[[float], None] | None = None
    if hop:  # imported only here: the bare stack's process stays without helix-dbos
        from helix_dbos.runtime.aio import background_loop

        def wait_on_loop(seconds: float) -> None:
            background_loop.run(asyncio.sleep(seconds))

    @DBOS.step(name="bare.llm")
    def bare_llm(i: int) -> dict[str, Any]:
        if Clock.seconds:
            if wait_on_loop is not None:
                wait_on_loop(Clock.seconds)
            else:
                time.sleep(Clock.seconds)
        if i < TOOL_CALLS:
            return {"type": "tool_calls", "tool_calls": [{"id": f"c{i}", "name": "noop", "arguments": {"i": i}}]}
        return {"type": "text", "content": "done"}

    @DBOS.step(name="bare.tool")
    def bare_tool(i: int) -> dict[str, Any]:
        return {"ok": True, "i": i}

    @DBOS.workflow(name="bare.agent")
    def bare_workflow() -> str:
        for i in range(MODEL_CALLS):
            out = bare_llm(i)
            if out["type"] == "text":
                return str(out["content"])
            bare_tool(i)
        return "unreachable"

    configure_dbos(url, dbos_engine=True, no_queues=True)
    DBOS.launch()
    handles: dict[str, Any] = {}

    def start() -> str:
        workflow_id = f"bare-{uuid.uuid4().hex}"
        with SetWorkflowID(workflow_id):
            handles[workflow_id] = DBOS.start_workflow(bare_workflow)
        return workflow_id

    def wait(workflow_id: str) -> None:
        assert handles.pop(workflow_id).get_result() == "done"

    return Stack(start, wait, DBOS.destroy)


def bare_async_stack(url: str) -> Stack:
    from dbos import DBOS, SetWorkflowID

    from scripts._bench_setup import configure_dbos

    @DBOS.step(name="bare.llm")
    async def bare_llm(i: int) -> dict[str, Any]:
        if Clock.seconds:
            await asyncio.sleep(Clock.seconds)
        if i < TOOL_CALLS:
            return {"type": "tool_calls", "tool_calls": [{"id": f"c{i}", "name": "noop", "arguments": {"i": i}}]}
        return {"type": "text", "content": "done"}

    @DBOS.step(name="bare.tool")
    async def bare_tool(i: int) -> dict[str, Any]:
        return {"ok": True, "i": i}

    @DBOS.workflow(name="bare.agent")
    async def bare_workflow() -> str:
        for i in range(MODEL_CALLS):
            out = await bare_llm(i)
            if out["type"] == "text":
                return str(out["content"])
            await bare_tool(i)
        return "unreachable"

    configure_dbos(url, no_queues=True)
    DBOS.launch()
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True, name="bench-client-loop")
    runner.start()
    handles: dict[str, Any] = {}

    async def start_one(workflow_id: str) -> Any:
        with SetWorkflowID(workflow_id):
            return await DBOS.start_workflow_async(bare_workflow)

    def start() -> str:
        workflow_id = f"bare-{uuid.uuid4().hex}"
        handles[workflow_id] = asyncio.run_coroutine_threadsafe(start_one(workflow_id), loop).result()
        return workflow_id

    def wait(workflow_id: str) -> None:
        handle = handles.pop(workflow_id)
        assert asyncio.run_coroutine_threadsafe(handle.get_result(), loop).result() == "done"

    def close() -> None:
        DBOS.destroy()
        loop.call_soon_threadsafe(loop.stop)

    return Stack(start, wait, close)


def helix_stack(
    url: str,
    dbos_overrides: dict[str, Any] | None = None,
    queue: str | None = None,
    rate_limit: str | None = None,
    hot_window: float | None = None,
) -> Stack:
    from helix_dbos import LLMGenerateInput, StepResult, define_agent, define_tool, launch, shutdown
    from helix_dbos.messages import ToolResultMessage
    from helix_dbos.runtime.queues import RunQueue
    from helix_dbos.runtime.rate_limits import ProviderRateLimit
    from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult

    class SleepingModel:
        """Sleeps the model latency (awaiting, as a network call would), then scripts the next turn."""

        async def generate_step(self, input: LLMGenerateInput) -> StepResult:
            if Clock.seconds:
                await asyncio.sleep(Clock.seconds)
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
        max_steps=MODEL_CALLS + 5,
    )
    executor = launch(
        url,
        agents=[agent],
        llm_adapter=SleepingModel(),
        takeover_after_seconds=None,
        dbos_overrides=dbos_overrides,
        queue=RunQueue.parse(queue) if queue else None,
        rate_limits=[ProviderRateLimit.parse(rate_limit)] if rate_limit else [],
        hot_window_seconds=hot_window,
    )
    handles: dict[str, Any] = {}

    def start() -> str:
        handle = executor.execute(agent, "go", session_id=f"c-{uuid.uuid4().hex}")
        handles[handle.workflow_id] = handle
        return handle.workflow_id

    def wait(workflow_id: str) -> None:
        result = handles.pop(workflow_id).result()
        assert result.status == "completed", result

    return Stack(start, wait, lambda: shutdown(executor))


def floor_stack(url: str) -> Stack:
    from dbos import DBOS, SetWorkflowID

    from scripts import _bench_floor
    from scripts._bench_setup import configure_dbos

    _bench_floor.model_latency = lambda: Clock.seconds
    configure_dbos(url, dbos_engine=True, no_queues=True)
    _bench_floor.install(url)
    DBOS.launch()
    handles: dict[str, Any] = {}

    def start() -> str:
        workflow_id = f"floor-{uuid.uuid4().hex}"
        _bench_floor.start_run(workflow_id)
        with SetWorkflowID(workflow_id):
            handles[workflow_id] = DBOS.start_workflow(_bench_floor.floor_workflow, workflow_id)
        return workflow_id

    def wait(workflow_id: str) -> None:
        assert handles.pop(workflow_id).get_result() == "done"

    def close() -> None:
        _bench_floor.close()
        DBOS.destroy()

    return Stack(start, wait, close)


def start_profiler(raw: str) -> subprocess.Popen[bytes]:
    """py-spy sampling the threads of this process that hold the GIL (its Python CPU), collapsed stacks."""
    import shutil

    py_spy = shutil.which("py-spy") or str(Path.home() / ".local" / "bin" / "py-spy")
    command = [py_spy, "record", "-p", str(os.getpid()), "-r", "200", "-f", "raw", "-o", raw, "--nonblocking", "--gil"]
    spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    return spy


def start_runs(
    stack: Stack, runs: int, simultaneous: int, before_threads_end: Callable[[], None] | None = None
) -> list[tuple[str, float]]:
    """Start ``runs`` runs: one after the other, or from ``simultaneous`` client threads at once.

    Each start is stamped when it was asked for, so a start that waited (for a pool, for the GIL)
    counts in its run's latency. ``before_threads_end`` is called once every start returned, while
    the client threads are still alive (to read their CPU).
    """

    def one(_: int) -> tuple[str, float]:
        submitted = time.time()
        return stack.start(), submitted

    if simultaneous <= 0:
        return [one(i) for i in range(runs)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=simultaneous, thread_name_prefix="bench-start") as pool:
        started = list(pool.map(one, range(runs)))
        if before_threads_end is not None:
            before_threads_end()
        return started


def peak_overlap(spans: list[tuple[float, float]]) -> int:
    """The most runs in flight at one moment, from each workflow's (created, ended) times."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = now = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


class ConnectionPeak:
    """Samples the database's client connections (``pg_stat_activity``) every 0.2 s; keeps the peak.

    The child is the database's only client during its load, so the count (less this sampler's own
    connection) is the process's: DBOS's pool, the store's, the LISTEN connections.
    """

    def __init__(self, url: str) -> None:
        import sqlalchemy as sa
        from sqlalchemy.pool import NullPool

        from helix_dbos.store.engine import to_sqlalchemy_url

        self.peak = 0
        self._engine = sa.create_engine(to_sqlalchemy_url(url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self._stop = threading.Event()
        self._query = sa.text(
            "SELECT count(*) - 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend'"
        )
        self._thread = threading.Thread(target=self._sample, daemon=True, name="connection-peak")
        self._thread.start()

    def _sample(self) -> None:
        with self._engine.connect() as conn:
            while not self._stop.wait(0.2):
                self.peak = max(self.peak, int(conn.execute(self._query).scalar_one()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._engine.dispose()


class PoolWaitCount(logging.Handler):
    """Counts the warnings of a pool checkout that timed out (DBOS's and the store's retries log them)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        logging.getLogger().addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "pool exhausted" in text or "QueuePool limit" in text:
            self.count += 1

    def stop(self) -> None:
        logging.getLogger().removeHandler(self)


def process_seconds(usage: resource.struct_rusage) -> float:
    """The process's CPU so far, user and system, every thread's (``getrusage``)."""
    return usage.ru_utime + usage.ru_stime


def idle_cpu(seconds: float) -> dict[str, float]:
    """CPU ms per second by thread kind while the stack sits idle for ``seconds`` (after its load).

    What a worker costs when no run is in flight: pollers, heartbeats, sweeps; the load's share of
    them is in its per-run figures too.
    """
    if seconds <= 0:
        return {}
    by_thread = ThreadCpu()
    by_thread.start()
    before = process_seconds(resource.getrusage(resource.RUSAGE_SELF))
    time.sleep(seconds)
    spent = by_thread.stop(process_seconds(resource.getrusage(resource.RUSAGE_SELF)) - before)
    return {kind: value / seconds * 1000 for kind, value in spent.items()}


def switches(usage: resource.struct_rusage) -> int:
    """The process's context switches so far, voluntary (a wait) and not (preempted)."""
    return usage.ru_nvcsw + usage.ru_nivcsw


def run_child(args: argparse.Namespace) -> None:
    """Measure one stack in this process and print its figures as one JSON line."""
    if args.tree:  # before anything imports helix_dbos: the package comes from that checkout
        sys.path.insert(0, args.tree)
    from dbos import DBOS

    from scripts._bench_pg import ServerCounters, ServerCpu

    stack_name, url, runs, latency = args.child, args.database_url, args.runs, args.latency
    threads = ThreadPeak()
    stack = {
        "bare-sync": bare_sync_stack,
        "bare-async": bare_async_stack,
        "helix": lambda url: helix_stack(url, queue=args.queue, rate_limit=args.rate_limit, hot_window=args.hot_window),
        "floor": floor_stack,
        # helix-dbos with DBOS's own system-database engine settings (the pre-ping on every checkout)
        "helix-pre-ping": lambda url: helix_stack(url, {"db_engine_kwargs": {}}),
        "bare-hop": lambda url: bare_sync_stack(url, hop=True),
    }[stack_name](url)
    for _ in range(3):  # warm up every path
        stack.wait(stack.start())
    sequential_ms = []
    for _ in range(args.sequential):
        began = time.perf_counter()
        stack.wait(stack.start())
        sequential_ms.append((time.perf_counter() - began) * 1000)
    counters = ServerCounters(url, flush_wait=args.flush_wait)
    server_cpu = ServerCpu(counters.engine)
    idle_from, server_idle_from = counters.snapshot(), server_cpu.seconds()
    before, server_before = counters.snapshot(), server_cpu.seconds()
    background = counters.rate_between(idle_from, before)
    Clock.seconds = latency
    counters.reset_statements()
    spy = start_profiler(args.profile) if args.profile else None
    threads.reset()
    by_thread = ThreadCpu()
    by_thread.start()
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    connections = ConnectionPeak(url)
    workflow_threads = WorkflowThreads()
    pool_waits = PoolWaitCount()
    started_at: dict[str, float] = {}
    first = time.time()
    for workflow_id, submitted in start_runs(stack, runs, args.simultaneous, by_thread.checkpoint):
        started_at[workflow_id] = submitted
    failed = 0
    for workflow_id in started_at:
        try:
            stack.wait(workflow_id)
        except Exception as exc:  # counted, not fatal: a failure under load is a figure too
            failed += 1
            print(f"run {workflow_id} failed: {exc!r}"[:300], file=sys.stderr)
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    thread_seconds = by_thread.stop(process_seconds(cpu_after) - process_seconds(cpu_before))
    server_after, load_ended = server_cpu.seconds(), time.perf_counter()
    peak_threads = threads.peak
    peak_workflow_threads, mean_workflow_threads = workflow_threads.stop()
    connections.stop()
    pool_waits.stop()
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=120)
    top = counters.statement_counts()[: args.statements]
    statements = [(c.query, c.calls / runs, c.exec_ms / runs, c.plans / runs, c.plan_ms / runs) for c in top]
    after = counters.snapshot()
    statuses = DBOS.list_workflows(workflow_ids=list(started_at), load_input=False, load_output=False)
    finished = {s.workflow_id: (s.updated_at or 0) / 1000 for s in statuses}
    latencies = sorted(finished[w] - started_at[w] for w in started_at)
    # In flight from its start (its dequeue, when queued) to its end: a queued run waiting is not.
    spans = [((s.dequeued_at or s.created_at or 0) / 1000, (s.updated_at or 0) / 1000) for s in statuses]
    cpu = process_seconds(cpu_after) - process_seconds(cpu_before)
    server_ms = None
    if server_idle_from is not None and server_before is not None and server_after is not None:
        idle_rate = (server_before - server_idle_from) / max(before.taken_at - idle_from.taken_at, 1e-9)
        server_ms = (server_after - server_before - idle_rate * (load_ended - before.taken_at)) / runs * 1000
    result = {
        "stack": stack_name,
        "runs": runs,
        "wall_s": max(finished.values()) - first,
        "latency_s": latencies,
        "cpu_ms_per_run": cpu / runs * 1000,
        "sys_ms_per_run": (cpu_after.ru_stime - cpu_before.ru_stime) / runs * 1000,
        "switches_per_run": (switches(cpu_after) - switches(cpu_before)) / runs,
        "server_cpu_ms_per_run": server_ms,
        "xacts_per_run": counters.delta(before, after, background.xact_commit) / runs,
        "rows_per_run": counters.delta(before, after, background.rows_written, field="rows_written") / runs,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_threads": peak_threads,
        "sequential_ms": statistics.median(sequential_ms) if sequential_ms else None,
        "statements": statements,
        "peak_in_flight": peak_overlap(spans),
        "peak_connections": connections.peak,
        "peak_workflow_threads": peak_workflow_threads,
        "mean_workflow_threads": mean_workflow_threads,
        "pool_waits": pool_waits.count,
        "failed": failed,
        "thread_ms_per_run": {kind: seconds / runs * 1000 for kind, seconds in thread_seconds.items()},
        "idle_thread_ms_per_s": idle_cpu(args.idle),
        "package": getattr(sys.modules.get("helix_dbos"), "__file__", None),
    }
    counters.close()
    threads.stop()
    stack.close()
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    os._exit(0)  # the stacks' daemon threads are not waited for: the figures are out


# -- the parent: alternate the stacks, print the table -------------------------------------------


def measure_stack(
    stack: str, url: str, args: argparse.Namespace, profile: str | None, tree: str | None = None
) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        stack,
        "--database-url",
        url,
        "--runs",
        str(args.runs),
        "--latency",
        str(args.latency),
        "--sequential",
        str(args.sequential),
        "--flush-wait",
        str(args.flush_wait),
        "--statements",
        str(args.statements),
        "--simultaneous",
        str(args.simultaneous),
        "--idle",
        str(args.idle),
    ]
    if args.queue:
        command += ["--queue", args.queue]
    if args.rate_limit:
        command += ["--rate-limit", args.rate_limit]
    if args.hot_window is not None:
        command += ["--hot-window", str(args.hot_window)]
    if profile:
        command += ["--profile", profile]
    if tree:
        command += ["--tree", tree]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=args.child_timeout)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return dict(json.loads(line[len(RESULT_PREFIX) :]))
    raise SystemExit(f"{stack} failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="runs started at once (up to 1,000)")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model call")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (medians over them)")
    parser.add_argument("--sequential", type=int, default=20, help="runs one at a time, instant model (0: none)")
    parser.add_argument("--stacks", default=",".join(STACKS[:4]), help=f"comma-separated, of {', '.join(STACKS)}")
    parser.add_argument("--flush-wait", type=float, default=11.0, help="idle seconds before a counter snapshot")
    parser.add_argument("--child-timeout", type=float, default=1800.0)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--statements", type=int, default=0, help="print each stack's N most called statements")
    parser.add_argument("--profile-dir", default=None, help="py-spy the load of --profile-stacks into this folder")
    parser.add_argument("--profile-stacks", default="helix", help="comma-separated stacks to profile")
    parser.add_argument("--profile-top", type=int, default=40)
    parser.add_argument("--simultaneous", type=int, default=0, help="start runs from N client threads at once")
    parser.add_argument("--threads", type=int, default=0, help="print each stack's CPU per run by thread, top N")
    parser.add_argument("--idle", type=float, default=0.0, help="then S idle seconds: CPU per second by thread")
    parser.add_argument("--queue", default=None, help="helix-dbos on a run queue (RunQueue.parse spec)")
    parser.add_argument("--rate-limit", default=None, help="a provider limit on helix-dbos's model (openai/none)")
    parser.add_argument("--hot-window", type=float, default=None, help="helix-dbos's hot_window_seconds (parking)")
    parser.add_argument("--child", choices=STACKS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--trees", nargs="+", default=None, help="measure the helix stack once per checkout")
    parser.add_argument("--tree", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--profile", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return
    stacks = [s.strip() for s in args.stacks.split(",") if s.strip()]
    unknown = sorted(set(stacks) - set(STACKS))
    if unknown:
        parser.error(f"unknown stacks {unknown}; choose from {', '.join(STACKS)}")
    if args.trees and "helix" not in stacks:
        parser.error("--trees measures the helix stack: add helix to --stacks")
    measured = measured_stacks(stacks, args.trees or [])
    from scripts._bench_setup import bench_database

    ideal = MODEL_CALLS * args.latency
    with bench_database(args.database_url, "capacity") as url:
        results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in measured}
        for round_no in range(args.rounds):
            order = measured if round_no % 2 == 0 else list(reversed(measured))
            for label, stack, tree in order:
                profile = None
                if args.profile_dir and stack in args.profile_stacks.split(","):
                    profile = str(Path(args.profile_dir) / f"{label.replace('@', '-')}-{round_no}.txt")
                results[label].append(measure_stack(stack, url, args, profile, tree))
        load = os.getloadavg()
        print(
            f"load: {args.runs} runs at once, {MODEL_CALLS} model calls of {args.latency:g} s + {TOOL_CALLS} "
            f"instant tools each; ideal {ideal:g} s per run, {args.runs / ideal:.1f} runs/s. One process per stack, "
            f"{args.rounds} alternating rounds (medians); PostgreSQL at {url.split('@')[-1]}; "
            f"machine load average {load[0]:.1f} ({os.cpu_count()} cores)"
        )
        figures = {s: Figures.of(r, ideal) for s, r in results.items()}
        print(HEADER)
        for stack, fig in figures.items():
            print(fig.row(stack))
        print_in_flight(results)
        helix_labels = [label for label, stack, _ in measured if stack == "helix"]
        for label in helix_labels:
            for bare in ("bare-sync", "bare-async", "floor", "helix-pre-ping"):
                if bare in figures:
                    print(ratios(figures[label], figures[bare], bare, label))
            if "bare-sync" in figures:
                print("targets (issue 32):" if label == "helix" else f"targets (issue 32), {label}:")
                for line in targets(figures, label):
                    print(line)
        if args.trees:
            print_trees(results, figures, helix_labels)
        if args.statements:
            print_statements(results)
        if args.threads or args.idle:
            print_threads(results, args.threads or 12)
        if args.profile_dir:
            print_profiles(Path(args.profile_dir), args.profile_top)


if __name__ == "__main__":
    main()
