"""``bench_capacity.py``'s report: the medians of each stack's rounds, its ratios, the targets, the details.

The parent process of ``scripts/bench_capacity.py`` runs one child per stack and round; each child
prints its figures as one JSON line. Everything here turns those into what the benchmark prints:
``Figures`` (a stack's medians), the table's rows, helix-dbos's ratios to each bare engine and to
the first tree, issue 32's targets, and the optional sections (runs in flight, CPU by thread, the
statements, the profiles).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Figures:
    """One stack's medians over the rounds."""

    runs_per_s: float
    p50_over_s: float
    p99_over_s: float
    cpu_ms: float
    server_cpu_ms: float | None
    """PostgreSQL's CPU per run (every server process, its idle rate subtracted); None if not local."""
    xacts: float
    rows: float
    rss_mb: float
    threads: float
    sequential_ms: float | None

    @staticmethod
    def of(results: list[dict[str, Any]], ideal_s: float) -> Figures:
        def med(values: list[float]) -> float:
            return statistics.median(values)

        def pct(latencies: list[float], q: float) -> float:
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))] - ideal_s

        sequential = [r["sequential_ms"] for r in results if r["sequential_ms"] is not None]
        server = [r["server_cpu_ms_per_run"] for r in results if r.get("server_cpu_ms_per_run") is not None]
        return Figures(
            runs_per_s=med([r["runs"] / r["wall_s"] for r in results]),
            p50_over_s=med([pct(r["latency_s"], 0.5) for r in results]),
            p99_over_s=med([pct(r["latency_s"], 0.99) for r in results]),
            cpu_ms=med([r["cpu_ms_per_run"] for r in results]),
            server_cpu_ms=med(server) if server else None,
            xacts=med([r["xacts_per_run"] for r in results]),
            rows=med([r["rows_per_run"] for r in results]),
            rss_mb=med([r["peak_rss_mb"] for r in results]),
            threads=med([r["peak_threads"] for r in results]),
            sequential_ms=med(sequential) if sequential else None,
        )

    def row(self, name: str) -> str:
        sequential = f"{self.sequential_ms:7.1f}" if self.sequential_ms is not None else "      -"
        server = f"{self.server_cpu_ms:8.1f}" if self.server_cpu_ms is not None else "       -"
        return (
            f"  {name:10s} {self.runs_per_s:7.1f} {self.p50_over_s:+8.2f} {self.p99_over_s:+8.2f} "
            f"{self.cpu_ms:8.1f} {server} {self.xacts:7.1f} {self.rows:7.1f} {self.rss_mb:7.0f} "
            f"{self.threads:7.0f} {sequential}"
        )


HEADER = (
    "  stack       runs/s  p50+ideal p99+ideal  CPU ms/run  PG ms/run xacts/run rows/run  RSS MB threads  seq ms\n"
    "  ---------- ------- -------- -------- -------- -------- ------- ------- ------- ------- -------"
)


def ratios(helix: Figures, bare: Figures, label: str, name: str = "helix") -> str:
    server = (
        f"  PG CPU {helix.server_cpu_ms / bare.server_cpu_ms:5.2f}x"
        if helix.server_cpu_ms and bare.server_cpu_ms
        else ""
    )
    sequential = (
        f"  sequential {helix.sequential_ms / bare.sequential_ms:5.2f}x"
        if helix.sequential_ms and bare.sequential_ms
        else ""
    )
    return (
        f"  {name}/{label:10s}: runs/s {helix.runs_per_s / bare.runs_per_s:5.2f}x  "
        f"CPU {helix.cpu_ms / bare.cpu_ms:5.2f}x{server}  xacts {helix.xacts - bare.xacts:+6.1f}/run  "
        f"rows {helix.rows - bare.rows:+6.1f}/run  RSS {helix.rss_mb / bare.rss_mb:5.2f}x{sequential}"
    )


def targets(figures: dict[str, Figures], label: str = "helix") -> list[str]:
    """Issue 32's targets against bare DBOS sync (and, for CPU, the cheaper bare engine), for ``label``'s helix-dbos."""
    helix, bare = figures[label], figures["bare-sync"]
    cheaper_cpu = min(f.cpu_ms for name, f in figures.items() if name.startswith("bare-"))
    checks = [
        (
            "runs/s >= 0.9x bare sync",
            f"{helix.runs_per_s / bare.runs_per_s:.2f}x",
            helix.runs_per_s >= 0.9 * bare.runs_per_s,
        ),
        ("CPU/run <= 1.2x bare", f"{helix.cpu_ms / cheaper_cpu:.2f}x", helix.cpu_ms <= 1.2 * cheaper_cpu),
        ("xacts/run <= bare + 11", f"{helix.xacts - bare.xacts:+.1f}", helix.xacts <= bare.xacts + 11),
    ]
    if helix.sequential_ms and bare.sequential_ms:
        floor = figures.get("floor")
        floor_note = (
            f", the floor {floor.sequential_ms / bare.sequential_ms:.2f}x" if floor and floor.sequential_ms else ""
        )
        checks.append(
            (
                "sequential latency <= 1.5x bare sync",
                f"{helix.sequential_ms / bare.sequential_ms:.2f}x{floor_note}",
                helix.sequential_ms <= 1.5 * bare.sequential_ms,
            )
        )
    return [f"  {'PASS' if ok else 'FAIL'}  {name}: {value}" for name, value, ok in checks]


def measured_stacks(stacks: list[str], trees: list[str]) -> list[tuple[str, str, str | None]]:
    """``(label, stack, tree)`` per child to run: the helix stack once per tree when trees are given.

    A tree's label is ``helix@`` and its folder's name (numbered when two trees share a name).
    """
    entries: list[tuple[str, str, str | None]] = []
    for stack in stacks:
        if stack != "helix" or not trees:
            entries.append((stack, stack, None))
            continue
        seen: dict[str, int] = {}
        for tree in trees:
            path = Path(tree).resolve()
            seen[path.name] = seen.get(path.name, 0) + 1
            suffix = f"-{seen[path.name]}" if seen[path.name] > 1 else ""
            entries.append((f"helix@{path.name}{suffix}", stack, str(path)))
    return entries


def print_trees(results: dict[str, list[dict[str, Any]]], figures: dict[str, Figures], labels: list[str]) -> None:
    """Which package each tree's children imported, and each later tree against the first."""
    print("trees (the helix_dbos package each tree's children imported):")
    for label in labels:
        packages = sorted({str(r.get("package")) for r in results[label]})
        print(f"  {label}: {', '.join(packages)}")
    first = labels[0]
    for label in labels[1:]:
        print(ratios(figures[label], figures[first], first, label))


def print_in_flight(results: dict[str, list[dict[str, Any]]]) -> None:
    """Per stack (medians over the rounds): runs in flight at once, connections, pool waits, failures."""
    print(
        "in flight at once / peak connections / pool-wait warnings / failed runs / "
        "kernel CPU ms per run / thread switches per run / threads in a workflow, peak and mean (medians):"
    )
    for stack, rounds in results.items():
        figures = [statistics.median(r.get(key, 0) for r in rounds) for key in FLIGHT_KEYS]
        print(f"  {stack:10s} " + " ".join(f"{value:7.0f}" for value in figures))


FLIGHT_KEYS = (
    "peak_in_flight",
    "peak_connections",
    "pool_waits",
    "failed",
    "sys_ms_per_run",
    "switches_per_run",
    "peak_workflow_threads",
    "mean_workflow_threads",
)


def print_threads(results: dict[str, list[dict[str, Any]]], top: int) -> None:
    """Each stack's client CPU by thread kind (``_bench_threads``), medians over the rounds.

    Per run under the load, and per second while idle afterwards (``--idle``): which threads of a
    process spend what ``CPU ms/run`` sums, workflow threads and the ones that run whatever the load.
    """
    for key, unit, title in (
        ("thread_ms_per_run", "ms/run", "under the load"),
        ("idle_thread_ms_per_s", "ms/s", "idle, after it"),
    ):
        for stack, rounds in results.items():
            kinds = {kind for r in rounds for kind in r.get(key, {})}
            if not kinds:
                continue
            medians = {kind: statistics.median(r.get(key, {}).get(kind, 0.0) for r in rounds) for kind in kinds}
            print(f"client CPU by thread, {stack}, {title} ({sum(medians.values()):.1f} {unit} in all):")
            for kind, value in sorted(medians.items(), key=lambda kv: -kv[1])[:top]:
                print(f"  {value:7.2f} {unit}  {kind}")


def print_statements(results: dict[str, list[dict[str, Any]]]) -> None:
    """Each stack's most called statements per run: calls, the server's plans and their ms, execution ms.

    From pg_stat_statements over the last round's load. Execution time is the executor's, not the
    parse, the round trip or the commit's work, so the columns' sum is below ``PG ms/run``. A
    statement with about as many plans as calls is planned afresh on every execution.
    """
    for stack, rounds in results.items():
        rows = rounds[-1]["statements"]
        print(
            f"statements per run, {stack} ({sum(row[1] for row in rows):.1f} calls, "
            f"{sum(row[4] for row in rows):.2f} ms planning and {sum(row[2] for row in rows):.2f} ms executing "
            f"in the top {len(rows)}):"
        )
        print("   calls   plans  plan ms  exec ms")
        for query, calls, ms, plans, plan_ms in rows:
            print(f"  {calls:6.2f} {plans:7.2f} {plan_ms:8.2f} {ms:8.2f}  {' '.join(query.split())[:120]}")


def print_profiles(folder: Path, top: int) -> None:
    """The profiled loads' samples by thread and by function (inclusive and self), all rounds together."""
    from collections import Counter

    from scripts.profile_overhead import tally

    for stack in sorted({raw.name.rsplit("-", 1)[0] for raw in folder.glob("*.txt")}):
        total, inclusive, own, threads = 0, Counter[str](), Counter[str](), Counter[str]()
        for raw in folder.glob(f"{stack}-*.txt"):
            n, inc, sel, thr = tally(raw)
            total += n
            inclusive.update(inc)
            own.update(sel)
            threads.update(thr)
        print(f"\nprofile of {stack}'s load: {total} samples of threads holding the GIL")
        for title, counter in (("by thread", threads), ("inclusive", inclusive), ("self", own)):
            print(f"-- {title}")
            for name, count in counter.most_common(top if title != "by thread" else 10):
                print(f"  {count / max(total, 1) * 100:5.1f}%  {name}")
