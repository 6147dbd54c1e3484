"""``scripts/bench_start.py`` runs end to end and prints a run's start, its result, its stream's end and a step commit.

A smoke run (two starts, two stream ends and two step commits, one round, this tree): it checks that the child
process launches, measures and reports, not any figure. The figures belong in the benchmark's own
output (docs/capacity.md), never in a timed assert.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(180)
def test_the_start_benchmark_prints_the_start_the_result_the_stream_end_and_a_step_commit(pg_database_url: str) -> None:
    command = [sys.executable, str(ROOT / "scripts" / "bench_start.py"), "--starts=2", "--ends=2", "--commits=2"]
    command += ["--warmup=1"]
    command += ["--rounds=1", f"--database-url={pg_database_url}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=170, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    medians = done.stdout.splitlines()[-1].split()
    words = [word.strip("()") for word in medians]  # the end's wall time is printed in parentheses
    figures = [float(word) for word in words if word.replace(".", "", 1).isdigit()]
    # start, result, their sum, the end and its wall time, a step commit and its wall time
    assert len(figures) == 7 and all(figure > 0 for figure in figures), done.stdout
    assert "stream end" in done.stdout and "step commit" in done.stdout
