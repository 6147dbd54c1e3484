"""Where a helix-dbos run spends its client CPU: bench_overhead's workload under py-spy.

Runs ``--runs`` sequential runs (after a warm-up) of helix-dbos or of the bare DBOS workflow while
``py-spy record --gil`` samples whichever thread holds the GIL in this process (the run happens on DBOS's executor and
helix-dbos's background threads, out of reach of cProfile, which sees one thread), then prints
the functions by inclusive share of the samples ("cumulative": a function counts once per sample
whose stack contains it) and by self share. ``--raw FILE`` keeps py-spy's collapsed stacks.

Usage:  python scripts/profile_overhead.py [--system helix|bare] [--runs 50] [--concurrency 1]
        [--stream sql|memory] [--top 45] [--rate 500] [--raw FILE]
``--concurrency N`` runs N at a time (bench_overhead's concurrent level); the per-thread table then
shows where the extra CPU of many runs in flight goes.
Needs ``py-spy`` (``pip install py-spy``) and permission to ptrace this process (root, or
``kernel.yama.ptrace_scope=0``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbos import DBOS

from scripts._bench_setup import bench_database, configure_dbos
from scripts.bench_overhead import make_executor, measure, run_bare, run_helix


def frame_name(frame: str) -> str:
    """``fn (path/to/module.py:12)`` -> ``module.py:fn`` (one entry per function, any line)."""
    name, _, where = frame.partition(" (")
    path = where.split(":")[0]
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if parts else path
    return f"{short}:{name}"


def thread_kind(frames: list[str]) -> str:
    """Which of the process's threads a stack ran on, by the function its thread was started with."""
    for frame in frames:
        if "Thread.run" in frame or "Thread._bootstrap" in frame:
            continue
        return frame
    return frames[-1]


def tally(raw: Path) -> tuple[int, Counter[str], Counter[str], Counter[str]]:
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";")[1:]]  # the first entry is the thread
        if not frames:
            continue
        total += count
        threads[thread_kind(frames)] += count
        for name in set(frames):
            inclusive[name] += count
        own[frames[-1]] += count
    return total, inclusive, own, threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", choices=("helix", "bare"), default="helix")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--stream", choices=("sql", "memory"), default="sql")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--raw", default=None)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    user_bin = Path.home() / ".local" / "bin" / "py-spy"  # where `pip install --user py-spy` puts it
    py_spy = shutil.which("py-spy") or (str(user_bin) if user_bin.exists() else None)
    if py_spy is None:
        raise SystemExit("py-spy not found: pip install py-spy")
    raw = Path(args.raw) if args.raw else Path(tempfile.mkdtemp()) / "stacks.txt"
    with bench_database(args.database_url, "profile") as url:
        configure_dbos(url)
        executor = make_executor(url, args.stream)
        DBOS.launch()
        run: Callable[[], float] = (lambda: run_helix(executor)) if args.system == "helix" else run_bare
        for _ in range(5):
            run()
        spy = subprocess.Popen(
            [
                py_spy,
                "record",
                "-p",
                str(os.getpid()),
                "-r",
                str(args.rate),
                "-f",
                "raw",
                "-o",
                str(raw),
                "--nonblocking",
                "--gil",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)  # py-spy attaches
        cpu, wall = time.process_time(), time.perf_counter()
        measure(run, args.runs, args.concurrency)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)
        executor.close()
        DBOS.destroy()
    total, inclusive, own, threads = tally(raw)
    print(
        f"{args.system}: {args.runs} runs, {args.concurrency} at a time, {wall / args.runs * 1000:.1f} ms/run, "
        f"CPU {cpu / args.runs * 1000:.1f} ms/run; "
        f"{total} samples (threads holding the GIL, i.e. Python CPU; 1 s before the runs included)"
    )
    print("\n-- share of samples by thread (the function the thread was started with)")
    for name, count in threads.most_common(12):
        print(f"  {count / total * 100:5.1f}%  {name}")
    print(f"\n-- inclusive (cumulative) share of samples, top {args.top}")
    for name, count in inclusive.most_common(args.top):
        print(f"  {count / total * 100:5.1f}%  {name}")
    print(f"\n-- self share, top {args.top}")
    for name, count in own.most_common(args.top):
        print(f"  {count / total * 100:5.1f}%  {name}")


if __name__ == "__main__":
    main()
