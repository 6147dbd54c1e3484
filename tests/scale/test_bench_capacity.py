"""``scripts/bench_capacity.py`` runs end to end and prints its table, ratios and targets.

A smoke run (5 runs of 0.05 s model calls started from three client threads at once, one round, no
idle waits, then the CPU by thread and half a second of idle): it checks that every stack's child
process launches, runs the load and reports, not any figure. The figures belong in the benchmark's
own output (docs/capacity.md), never in a timed assert.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(180)
def test_capacity_benchmark_prints_every_stack_and_the_targets(pg_database_url: str) -> None:
    command = [
        sys.executable,
        str(ROOT / "scripts" / "bench_capacity.py"),
        "--runs=5",
        "--latency=0.05",
        "--rounds=1",
        "--sequential=1",
        "--flush-wait=0",
        "--stacks=bare-sync,bare-async,helix,bare-hop",
        "--simultaneous=3",  # the runs started from three client threads at once
        "--threads=4",
        "--idle=0.5",
        f"--database-url={pg_database_url}",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=170, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for stack in ("bare-sync", "bare-async", "helix", "bare-hop"):
        row = next(line for line in lines if line.split()[:1] == [stack])
        assert len(row.split()) == 11, row  # the stack and its ten figures (PostgreSQL's CPU: a number, or "-")
    assert any(line.strip().startswith("helix/bare-sync") for line in lines)
    flight = lines.index(next(line for line in lines if line.startswith("in flight at once")))
    for line in lines[flight + 1 : flight + 5]:  # the stack, its eight figures, no run failed
        figures = line.split()
        assert len(figures) == 9 and figures[4] == "0", line
        assert float(figures[6]) > 0, line  # its threads switched
        # threads seen executing a workflow: none for async workflows (coroutines on DBOS's loop)
        assert (float(figures[7]) == 0) == (figures[0] == "bare-async"), line
    targets = lines.index("targets (issue 32):")
    verdicts = [line.split()[0] for line in lines[targets + 1 : targets + 5]]
    assert set(verdicts) <= {"PASS", "FAIL"}, done.stdout
    # --threads: the load's CPU by thread kind, the workflows' executor threads among them; --idle: per second
    load = lines.index(next(line for line in lines if line.startswith("client CPU by thread, helix, under the load")))
    kinds = [line.split(maxsplit=2)[2] for line in lines[load + 1 : load + 5]]
    assert "dbos-executor" in kinds, done.stdout
    assert any(line.startswith("client CPU by thread, helix, idle, after it") for line in lines), done.stdout


def test_the_statements_table_shows_plans_beside_executions(capsys: pytest.CaptureFixture[str]) -> None:
    from scripts.bench_capacity import print_statements

    # Per run: (query, calls, execution ms, plans, planning ms), as a child reports them.
    rows = [["WITH s AS (UPDATE helix_sessions SET x = $1)", 11.0, 3.8, 1.6, 1.1], ["COMMIT", 44.0, 1.3, 0.0, 0.0]]
    print_statements({"helix": [{"statements": rows}]})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "statements per run, helix (55.0 calls, 1.10 ms planning and 5.10 ms executing in the top 2):"
    assert lines[1].split() == ["calls", "plans", "plan", "ms", "exec", "ms"]
    assert lines[2].split()[:4] == ["11.00", "1.60", "1.10", "3.80"] and lines[2].endswith("SET x = $1)")


@pytest.mark.timeout(180)
def test_trees_measure_each_checkout_with_its_own_package(pg_database_url: str, tmp_path: Path) -> None:
    """``--trees`` runs the helix stack once per checkout, each child importing that checkout's package."""
    other = tmp_path / "other"
    shutil.copytree(ROOT / "helix_dbos", other / "helix_dbos", ignore=shutil.ignore_patterns("__pycache__"))
    command = [
        sys.executable,
        str(ROOT / "scripts" / "bench_capacity.py"),
        "--runs=3",
        "--latency=0.05",
        "--rounds=1",
        "--sequential=1",
        "--flush-wait=0",
        "--stacks=bare-sync,helix",
        "--trees",
        str(ROOT),
        str(other),
        f"--database-url={pg_database_url}",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=170, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    here, there = f"helix@{ROOT.name}", "helix@other"
    for label in (here, there):
        row = next(line for line in lines if line.split()[:1] == [label])
        assert len(row.split()) == 11, row
        assert any(line.strip().startswith(f"{label}/bare-sync") for line in lines), done.stdout
    packages = lines.index("trees (the helix_dbos package each tree's children imported):")
    imported = dict(line.strip().split(": ", 1) for line in lines[packages + 1 : packages + 3])
    assert imported[there] == str(other / "helix_dbos" / "__init__.py"), imported
    assert imported[here] == str(ROOT / "helix_dbos" / "__init__.py"), imported
    assert any(line.strip().startswith(f"{there}/{here}") for line in lines), done.stdout


def test_trees_need_the_helix_stack() -> None:
    command = [sys.executable, str(ROOT / "scripts" / "bench_capacity.py"), "--stacks=bare-sync", "--trees", "."]
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT
    )
    assert done.returncode == 2 and "--trees measures the helix stack" in done.stderr, done.stderr
