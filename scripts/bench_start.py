"""A run's edges and its step commits on the calling thread: its start (``execute``, then ``result()``),
each model call's step commit and its stream's end.

Issue 32: under load a helix-dbos process is bound by its own client CPU, and every round trip to
PostgreSQL costs about a millisecond of it. This measures what one start costs the thread that
calls it (``time.thread_time``, so other threads' work and waiting are not counted): ``--starts``
sequential starts of a new session (``session_id=f"c-{uuid}"``, as ``bench_capacity.py`` starts
its runs), each with an instant one-call model, then ``result()``. The executor is built by
``launch()`` on PostgreSQL (durable stream), after ``--warmup`` runs. Then ``--ends`` streams are
each ended with their last two chunks still queued, as a run's finalize ends its stream (its
closing chunks held for the end's own write): the end's wall time and CPU on the ending thread.
Then ``--commits`` step commits of one run (``SessionStore.commit_step``, a tool call and its
result each, as a model call that called a tool commits them): their wall time and CPU.

``--trees A B ...`` measures other checkouts of helix-dbos in the same session: each tree's child
process imports the package from that tree, on a fresh database of the same throw-away cluster,
alternated over ``--rounds`` rounds so a shared machine's load falls on all of them alike. It prints
one line per tree and round, then each tree's median.

Usage:  python scripts/bench_start.py [--starts 300] [--ends 300] [--commits 300] [--warmup 20]
        [--rounds 2] [--trees PATH ...] [--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("BENCH_TREE", str(_HERE)))  # the child imports its tree's package


def child(url: str, starts: int, ends: int, commits: int, warmup: int) -> dict[str, Any]:
    """Launch on ``url``, warm up, then measure ``starts`` starts, ``ends`` stream ends and ``commits`` commits."""
    from helix_dbos import LLMGenerateInput, StepResult, define_agent, launch
    from helix_dbos.runtime.launch import shutdown
    from helix_dbos.step_result import TextStepResult

    class InstantModel:
        async def generate_step(self, input: LLMGenerateInput) -> StepResult:
            return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")

    agent = define_agent("bench-start", system_prompt="benchmark", llm_config="openai/none")
    executor = launch(url, agents=[agent], llm_adapter=InstantModel())
    try:
        for _ in range(warmup):
            executor.execute(agent, "go", session_id=f"c-{uuid.uuid4()}").result(timeout_seconds=60)
        start_cpu = result_cpu = 0.0
        wall = time.perf_counter()
        for _ in range(starts):
            t0 = time.thread_time()
            handle = executor.execute(agent, "go", session_id=f"c-{uuid.uuid4()}")
            t1 = time.thread_time()
            assert handle.result(timeout_seconds=60).status == "completed"
            t2 = time.thread_time()
            start_cpu += t1 - t0
            result_cpu += t2 - t1
        wall = time.perf_counter() - wall
    finally:
        shutdown(executor)
    return {
        "start_ms": 1000 * start_cpu / starts,
        "result_ms": 1000 * result_cpu / starts,
        "wall_ms": 1000 * wall / starts,
        **stream_ends(url, ends),
        **step_commits(url, commits),
    }


def step_commits(url: str, commits: int) -> dict[str, float]:
    """``commits`` step commits of one run, each a tool call and its result, after 10 unmeasured ones."""
    from helix_dbos.store import SqlSessionStore
    from helix_dbos.testing.store_contract.helpers import commit, start, tool_step

    store = SqlSessionStore(url)
    try:
        session = f"commits-{uuid.uuid4()}"
        run = f"{session}-run"
        start(store, session, run)
        cpu = wall = 0.0
        for step in range(1, commits + 11):
            t0, w0 = time.thread_time(), time.perf_counter()
            applied = commit(store, step, 2 * step - 1, tool_step(f"c{step}"), session_id=session, run_id=run)
            if step > 10:
                cpu += time.thread_time() - t0
                wall += time.perf_counter() - w0
            assert applied.applied
    finally:
        store.close()
    return {"commit_ms": 1000 * cpu / max(commits, 1), "commit_wall_ms": 1000 * wall / max(commits, 1)}


def stream_ends(url: str, ends: int) -> dict[str, float]:
    """End ``ends`` streams, each with its last two chunks held for the end (a run's closing chunks)."""
    from helix_dbos.runtime.aio import background_loop
    from helix_dbos.stream.chunks import TextDeltaChunk
    from helix_dbos.stream.sql import SqlStreamManager

    def chunk(delta: str) -> TextDeltaChunk:
        return TextDeltaChunk(agent_id="bench", agent_type="bench", step=1, content=delta)

    manager = SqlStreamManager(url, batch_max_delay=60)  # the queued chunks wait for the end's hold
    try:
        streams = [f"end-{uuid.uuid4()}" for _ in range(ends)]
        for stream_id in streams:  # the stream exists, and its chunks wait for a hold, as a run's do
            manager.enqueue_keyed(stream_id, chunk("first"), f"{stream_id}:0", run_id="r")
        background_loop.run(manager.flush())
        for stream_id in streams:
            hold = manager.hold_for_transaction(stream_id, manager._engine)
            assert hold is not None
            hold.release(stored=True)
        cpu = wall = 0.0
        for stream_id in streams:
            manager.enqueue_keyed(stream_id, chunk("checkpoint"), f"{stream_id}:1", run_id="r")
            manager.enqueue_keyed(stream_id, chunk("output"), f"{stream_id}:2", run_id="r")
            t0, w0 = time.thread_time(), time.perf_counter()
            manager.terminate_from_thread(stream_id)
            cpu += time.thread_time() - t0
            wall += time.perf_counter() - w0
    finally:
        background_loop.run(manager.aclose())
    return {"end_ms": 1000 * cpu / max(ends, 1), "end_wall_ms": 1000 * wall / max(ends, 1)}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--ends", type=int, default=300)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--trees", nargs="*", default=[str(_HERE)], help="checkouts of helix-dbos to measure")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.starts, args.ends, args.commits, args.warmup)))
        return

    from scripts._bench_setup import bench_database
    from tests.pg import create_database, unique_name

    figures: dict[str, list[dict[str, Any]]] = {tree: [] for tree in args.trees}
    with bench_database(args.database_url, "bench_start") as first_url:
        for round_ in range(args.rounds):
            for tree in args.trees:
                url = create_database(first_url, unique_name("bench_start"))
                env = {**os.environ, "BENCH_TREE": tree, "PYTHONPATH": tree}
                command = [sys.executable, __file__, "--child", url, "--starts", str(args.starts)]
                command += ["--ends", str(args.ends), "--commits", str(args.commits), "--warmup", str(args.warmup)]
                load = load_average()
                out = subprocess.run(command, env=env, check=True, capture_output=True, text=True, timeout=1800)
                row = json.loads(out.stdout.strip().splitlines()[-1])
                figures[tree].append(row)
                print(
                    f"round {round_ + 1}  {tree:<28} start {row['start_ms']:6.2f} ms CPU  "
                    f"result {row['result_ms']:6.2f} ms CPU  wall {row['wall_ms']:6.2f} ms/run  "
                    f"stream end {row['end_ms']:5.2f} ms CPU, {row['end_wall_ms']:5.2f} ms wall  "
                    f"step commit {row['commit_ms']:5.2f} ms CPU, {row['commit_wall_ms']:5.2f} ms wall  "
                    f"(load average before: {load})",
                    flush=True,
                )
    print("\nmedians over the rounds (CPU on the calling thread, per run; the stream end's wall time too):")
    for tree, rows in figures.items():
        start = statistics.median(r["start_ms"] for r in rows)
        result = statistics.median(r["result_ms"] for r in rows)
        end, end_wall, step, step_wall = (
            statistics.median(r[key] for r in rows) for key in ("end_ms", "end_wall_ms", "commit_ms", "commit_wall_ms")
        )
        print(
            f"  {tree:<28} start {start:6.2f} ms  result {result:6.2f} ms  start+result {start + result:6.2f} ms  "
            f"stream end {end:5.2f} ms ({end_wall:5.2f} ms wall)  step commit {step:5.2f} ms ({step_wall:5.2f} ms wall)"
        )


if __name__ == "__main__":
    main()
