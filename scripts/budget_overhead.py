"""Where one run's wall time goes: bench_overhead's workload, timed part by part.

``bench_overhead.py`` says how much slower a helix-dbos run is than a bare DBOS workflow making the
same 19 steps; ``profile_overhead.py`` samples the CPU. This script answers the question between
the two: which parts of a run take its *wall* time, and how many of each there are. It wraps the
functions that make up a run with a timer (wall time and the calling thread's CPU), runs
``--runs`` sequential runs of helix-dbos, then of the bare workflow and of the floor
(``_bench_floor.py``), and prints, per system, each part's calls, milliseconds per run and
milliseconds per call. Parts nest (a step's commit is inside the step), so the rows do not add up;
"DBOS step checkpoints" is DBOS's check and record around every step, the same code in all three.

The timers cost a few microseconds per call; compare the rows, not the totals, with bench_overhead.
Timing DBOS's checkpointing reaches into DBOS's ``SystemDatabase`` (a measurement, not a use).

Usage:  python scripts/budget_overhead.py [--runs 40] [--database-url URL]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbos import DBOS
from dbos._sys_db import SystemDatabase

from helix_dbos.runtime import aio, executor, loop, steps, tools
from scripts import _bench_floor
from scripts._bench_setup import bench_database, configure_dbos
from scripts.bench_overhead import agent, make_executor, run_bare


@dataclass
class Part:
    calls: int = 0
    wall: float = 0.0
    cpu: float = 0.0


PARTS: dict[str, Part] = {}


def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            part = PARTS.setdefault(label, Part())
            part.calls += 1
            part.wall += time.perf_counter() - wall
            part.cpu += time.thread_time() - cpu

    return wrapper


def wrap_function(module: Any, name: str, label: str) -> None:
    """Time ``module.name`` wherever helix-dbos imported it by name (``from x import name``)."""
    original = getattr(module, name)
    replacement = timed(label, original)
    for loaded in list(sys.modules.values()):
        if getattr(loaded, "__name__", "").startswith("helix_dbos") and getattr(loaded, name, None) is original:
            setattr(loaded, name, replacement)


def wrap_method(cls: type, name: str, label: str) -> None:
    setattr(cls, name, timed(label, getattr(cls, name)))


def instrument() -> None:
    wrap_method(SystemDatabase, "check_operation_execution", "DBOS step checkpoints: check")
    wrap_method(SystemDatabase, "record_operation_result", "DBOS step checkpoints: record")
    wrap_method(executor.DBOSAgentExecutor, "execute", "caller: execute()")
    wrap_method(executor.DBOSAgentExecutor, "wait_for_result", "caller: result()")
    wrap_method(executor.DBOSAgentExecutor, "get_usage_summary", "caller: result(): usage rollup")
    wrap_function(loop, "run_agent_loop", "workflow: the whole loop")
    wrap_function(loop, "_call_model", "loop: model call (DBOS step)")
    wrap_function(steps, "llm_step", "step body: LLM step")
    wrap_method(aio.BackgroundLoop, "run", "step body: LLM step: model on the event loop")
    wrap_function(steps, "commit_with_chunks", "step body: store commit (+ stream chunks)")
    wrap_function(tools, "execute_tools", "loop: tool batch (DBOS steps)")
    wrap_function(steps, "tool_step", "step body: tool step")
    wrap_function(loop, "_finish", "loop: finish (DBOS step)")
    wrap_function(steps, "finalize_step", "step body: finalize")
    wrap_function(steps, "publish_outcome", "step body: finalize: outcome event")
    wrap_function(steps, "_close_stream", "step body: finalize: stream end")
    _bench_floor._commit = timed("floor: commit statement", _bench_floor._commit)  # type: ignore[method-assign]


def measure(name: str, run: Callable[[], Any], runs: int) -> None:
    PARTS.clear()
    started = time.perf_counter()
    for _ in range(runs):
        run()
    wall = (time.perf_counter() - started) / runs * 1000
    print(f"\n{name}: {wall:.1f} ms per run (wall)")
    print(f"  {'part':52s} {'calls':>6s} {'ms/run':>8s} {'ms/call':>8s} {'CPU ms/run':>11s}")
    for label, part in sorted(PARTS.items(), key=lambda kv: -kv[1].wall):
        print(
            f"  {label:52s} {part.calls / runs:6.1f} {part.wall / runs * 1000:8.2f} "
            f"{part.wall / part.calls * 1000:8.3f} {part.cpu / runs * 1000:11.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    instrument()
    with bench_database(args.database_url, "budget") as url:
        configure_dbos(url)
        helix = make_executor(url, "sql")
        _bench_floor.install(url)
        DBOS.launch()

        def run_helix() -> None:
            result = helix.execute(agent, "go", session_id=f"b-{uuid.uuid4().hex}").result()
            assert result.status == "completed", result

        systems = [("helix-dbos", run_helix), ("bare DBOS", run_bare), ("floor", _bench_floor.run_floor)]
        for _name, run in systems:  # warm-up: connections, prepared statements, caches
            for _ in range(10):
                run()
        for name, run in systems:
            measure(name, run, args.runs)
        helix.close()
        _bench_floor.close()
        DBOS.destroy()


if __name__ == "__main__":
    main()
