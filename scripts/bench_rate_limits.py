"""A shared provider limit in real processes on PostgreSQL, against the same load with no limit.

Every figure comes from real ``helix-dbos`` processes (``tests/scale/rate_limit_load.py``): one API
server (``serve --no-execute``) and three workers, each run making one LiteLLM call to a scripted
provider that answers ``429`` once ``N`` requests were served in the second before. Rows:

- ``exact`` (the default mode): ``--rate-limit openai/:requests=N/1,mode=exact`` (admitted by DBOS's
  limiter, each send claims a slot in PostgreSQL just before it leaves and is counted until a second
  after it left: ``N`` per ``1 + margin`` seconds when sends are on time);
- ``strict``: ``--rate-limit openai/:requests=N/1,mode=strict`` (each slot held until a second after its call);
- ``rolling``: ``--rate-limit openai/:requests=N/1,mode=rolling`` (DBOS's limiter counts admissions);
- ``none``: no limit (the provider's 429s are retried by the LiteLLM adapter).

Prints, per row: runs, N, completed/failed, requests the provider saw and refused, the most it saw
in any one-second window (its own clock), throughput (requests / (last - first + 1 s)) against N,
the throughput of the steady middle (the arrivals between 20 % and 80 % of them) against N,
and p50/p95 admission wait (enqueued -> dequeued, from DBOS's rows).

Usage: python scripts/bench_rate_limits.py [--runs 200] [--limit 10] [--modes exact,strict,rolling,none]
[--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py;
fsync off): absolute figures are for comparison between rows, on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix_dbos import upgrade
from scripts._bench_setup import DATABASE_URL_ENV
from tests.pg import create_database, start_local_cluster, unique_name
from tests.scale.rate_limit_load import LoadFigures, run_load

ROWS: dict[str, str | None] = {"exact": "exact", "strict": "strict", "rolling": "rolling", "none": None}
"""Each row's ``mode`` (``none``: no limit at all)."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _row(label: str, f: LoadFigures, n: int) -> str:
    return (
        f"{label:<8} {f.runs:>5} {n:>4} {f.completed:>5}/{f.failed:<4} {f.requests:>6} {f.rejected:>6} "
        f"{f.max_per_second:>8} {f.throughput:>8.2f} {100 * f.throughput / n:>6.0f}% "
        f"{100 * f.steady_throughput / n:>6.0f}% "
        f"{_ms(f.admission_wait_p50_ms):>8} {_ms(f.admission_wait_p95_ms):>8} {f.seconds:>6.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--modes", default=",".join(ROWS), help="the rows to measure, comma-separated")
    parser.add_argument("--database-url", default=os.environ.get(DATABASE_URL_ENV))
    args = parser.parse_args()
    cluster = None if args.database_url else start_local_cluster()
    server_url = args.database_url or (cluster.url if cluster else "")
    print(
        f"{'limit':<8} {'runs':>5} {'N':>4} {'ok/fail':>10} {'seen':>6} {'429s':>6} {'max/1s':>8} "
        f"{'req/s':>8} {'of N':>7} {'steady':>7} {'wait p50':>8} {'p95 ms':>8} {'secs':>6}"
    )
    try:
        for label in args.modes.split(","):
            mode = ROWS[label]
            url = create_database(server_url, unique_name(f"bench_rl_{label}"))
            upgrade(url)
            with tempfile.TemporaryDirectory() as workdir:
                figures, deployment, _ = run_load(
                    url,
                    Path(workdir),
                    runs=args.runs,
                    limit=args.limit if mode else None,
                    provider_quota=args.limit,
                    mode=mode,
                )
                deployment.close()
            print(_row(label, figures, args.limit), flush=True)
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
