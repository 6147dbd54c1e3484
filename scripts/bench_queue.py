"""Queued starts against local starts, in real processes on PostgreSQL (issue 11).

Every figure comes from real ``helix-dbos`` processes (``tests/scale/deployment.py``): an API
server, and with a queue, ``serve --no-execute`` plus N ``helix-dbos worker`` processes. Each run is
one model call (``tests/scale/agents.py``) that logs when it starts.

Prints:
- **latency**: ``POST /v1/runs`` sent -> the model call starts, p50/p95 over sequential runs (one
  at a time, an idle deployment): a local start (the server runs it) against a queued one, for
  several polling intervals (the queue thread polls; nothing wakes it on enqueue);
- **throughput**: a burst of runs (each model call sleeping ``--step-seconds``) with 1, 2 and 3
  workers: runs/s from the first request to the last completion, and the same latency under load;
- **idle cost** of polling: CPU seconds per second of one idle worker, per polling interval.

Usage: python scripts/bench_queue.py [--samples 40] [--burst 120] [--step-seconds 0.05]
       [--intervals 0.01,0.02,0.05,0.2,1.0] [--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py;
fsync off): absolute figures are for comparison between rows, on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix_dbos import upgrade
from scripts._bench_setup import DATABASE_URL_ENV
from tests.pg import create_database, start_local_cluster, unique_name
from tests.scale.deployment import Deployment


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _latencies(deployment: Deployment, sent: dict[str, float]) -> list[float]:
    starts = {c["session_id"]: c["start"] for c in deployment.calls()}
    return [(starts[s] - t0) * 1000 for s, t0 in sent.items() if s in starts]


def _sequential(deployment: Deployment, samples: int) -> list[float]:
    sent: dict[str, float] = {}
    for i in range(samples + 3):
        t0 = time.time()
        session = deployment.start_run(f"seq {i}")
        deployment.wait_done([session])
        if i >= 3:  # the first runs warm up connections and pools
            sent[session] = t0
    return _latencies(deployment, sent)


def _burst(deployment: Deployment, runs: int) -> tuple[float, list[float]]:
    sent: dict[str, float] = {}

    def one(i: int) -> None:
        t0 = time.time()
        sent[deployment.start_run(f"burst {i}")] = t0

    started = time.time()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(runs)))
    # Done when every run's model call has ended (read from the log, not by polling the API,
    # which would load the very processes being measured).
    deadline = time.monotonic() + 600
    while True:
        ends = {c["session_id"]: c["end"] for c in deployment.calls() if c["session_id"] in sent}
        if len(ends) == len(sent) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return len(ends) / (max(ends.values()) - started), _latencies(deployment, sent)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _row(label: str, values: list[float], extra: str = "") -> None:
    print(
        f"{label:<34} p50 {statistics.median(values):7.1f} ms   p95 {_pct(values, 0.95):7.1f} ms"
        f"   n={len(values)}{extra}",
        flush=True,
    )


def _with(server: str, queue: str | None, workers: int, step: float, body: Callable[[Deployment], None]) -> None:
    """A fresh database on ``server`` and a deployment on it, for one measurement."""
    url = create_database(server, unique_name("bench_queue"))
    upgrade(url)
    with tempfile.TemporaryDirectory(prefix="bench-queue-") as tmp:
        deployment = Deployment(url, Path(tmp), queue=queue, workers=workers, step_seconds=step)
        try:
            time.sleep(1.5)  # the workers' queue threads start within a second of launch
            body(deployment)
        finally:
            deployment.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--burst", type=int, default=120)
    parser.add_argument("--step-seconds", type=float, default=0.05)
    parser.add_argument("--intervals", default="0.01,0.02,0.05,0.2,1.0")
    parser.add_argument("--workers", default="1,2,3")
    parser.add_argument("--skip-burst", action="store_true")
    parser.add_argument("--database-url")
    args = parser.parse_args()
    intervals = [float(v) for v in args.intervals.split(",") if v]
    worker_counts = [int(v) for v in args.workers.split(",") if v]

    server = args.database_url or os.environ.get(DATABASE_URL_ENV)
    cluster = None
    if server is None:
        cluster = start_local_cluster()
        server = cluster.url
    try:
        _run(server, args, intervals, worker_counts)
    finally:
        if cluster is not None:
            cluster.stop()


def _run(server: str, args: argparse.Namespace, intervals: list[float], worker_counts: list[int]) -> None:
    print("== latency: POST /v1/runs -> model call starts, one run at a time", flush=True)
    _with(server, None, 0, 0.0, lambda d: _row("local start (serve runs it)", _sequential(d, args.samples)))
    for interval in intervals:

        def measure(d: Deployment, interval: float = interval) -> None:
            worker = d.workers["w1"].process.pid
            cpu0, t0 = _cpu_seconds(worker), time.perf_counter()
            time.sleep(3.0)
            idle = (_cpu_seconds(worker) - cpu0) / (time.perf_counter() - t0)
            lat = _sequential(d, args.samples)
            _row(f"queued, poll {interval:g} s, 1 worker", lat, f"   idle worker CPU {idle:.3f} s/s")

        _with(server, f"bench:poll={interval}", 1, 0.0, measure)

    if args.skip_burst:
        return
    print(f"== throughput: {args.burst} runs at once, model call {args.step_seconds} s, 8 client threads", flush=True)

    def local(d: Deployment) -> None:
        rate, lat = _burst(d, args.burst)
        _row(f"local start: {rate:6.1f} runs/s", lat)

    _with(server, None, 0, args.step_seconds, local)
    for workers in worker_counts:

        def queued(d: Deployment, workers: int = workers) -> None:
            rate, lat = _burst(d, args.burst)
            _row(f"queued, {workers} worker(s): {rate:6.1f} runs/s", lat)

        _with(server, "bench:poll=0.02", workers, args.step_seconds, queued)


if __name__ == "__main__":
    main()
