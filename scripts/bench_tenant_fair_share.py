"""One tenant's flood against another tenant's single run, with and without the tenant partition (issue 31).

Real ``helix-dbos`` processes on PostgreSQL (``tests/scale/deployment.py``): ``serve --no-execute``
with two tenants' tokens and one worker, on a queue with ``concurrency=2``. Tenant ``acme`` posts
``--flood`` runs (each model call sleeping ``--step-seconds``), then tenant ``globex`` posts one.
Each row reads DBOS's own records of globex's run: how long it waited for a worker (``dequeued_at``
minus ``created_at``) and how many of acme's earlier runs it overtook.

Prints one row per queue: without ``tenant_concurrency`` (DBOS dequeues in one order: globex waits
behind the flood) and with ``tenant_concurrency=1`` (each tenant's partition is visited every poll).

Usage: python scripts/bench_tenant_fair_share.py [--flood 100] [--step-seconds 0.2] [--poll 0.05]
       [--database-url URL]
Without a URL (or HELIX_BENCH_DATABASE_URL) it starts a throw-away PostgreSQL cluster (tests/pg.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from dbos import DBOSClient

from helix_dbos import upgrade
from helix_dbos.runtime.launch import dbos_system_database_url
from scripts._bench_setup import DATABASE_URL_ENV
from tests.pg import create_database, start_local_cluster, unique_name
from tests.scale.deployment import Deployment

TOKENS = {"acme": "bench-acme-token-0123", "globex": "bench-globex-token-0123"}


def _client(deployment: Deployment, tenant: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {TOKENS[tenant]}"}
    return httpx.Client(base_url=f"http://127.0.0.1:{deployment.port}", headers=headers, timeout=60)


def _start(http: httpx.Client, text: str) -> str:
    response = http.post("/v1/runs", json={"agent": "sleeper", "input": text})
    response.raise_for_status()
    return str(response.json()["session_id"])


def measure(server: str, queue: str, flood: int, step_seconds: float) -> tuple[float, int]:
    """globex's wait for a worker (seconds) and how many of acme's earlier runs it overtook."""
    url = create_database(server, unique_name("bench_tenants"))
    upgrade(url)
    pairs = ",".join(f"{tenant}={token}" for tenant, token in TOKENS.items())
    with tempfile.TemporaryDirectory(prefix="bench-tenants-") as tmp:
        deployment = Deployment(
            url, Path(tmp), queue=queue, workers=1, step_seconds=step_seconds, extra_env={"HELIX_TENANT_TOKENS": pairs}
        )
        try:
            time.sleep(1.5)  # the worker's queue thread starts within a second of launch
            with _client(deployment, "acme") as acme, _client(deployment, "globex") as globex:
                with ThreadPoolExecutor(8) as pool:
                    flooded = list(pool.map(lambda i: _start(acme, f"flood {i}"), range(flood)))
                mine = _start(globex, "one")
                globex.get(f"/v1/sessions/{mine}/result", params={"timeout_seconds": 300}).raise_for_status()
            client = DBOSClient(system_database_url=dbos_system_database_url(url))
            try:
                (run,) = client.list_workflows(workflow_ids=[f"{mine}-turn-1"], load_input=False, load_output=False)
                backlog = client.list_workflows(
                    workflow_ids=[f"{s}-turn-1" for s in flooded], load_input=False, load_output=False
                )
            finally:
                client.destroy()
        finally:
            deployment.close()
    assert run.created_at is not None and run.dequeued_at is not None
    overtaken = sum(
        1
        for w in backlog
        if w.created_at is not None
        and w.created_at < run.created_at
        and (w.dequeued_at is None or w.dequeued_at > run.dequeued_at)
    )
    return (run.dequeued_at - run.created_at) / 1000, overtaken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flood", type=int, default=100)
    parser.add_argument("--step-seconds", type=float, default=0.2)
    parser.add_argument("--poll", type=float, default=0.05)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    server = args.database_url or os.environ.get(DATABASE_URL_ENV)
    cluster = None
    if server is None:
        cluster = start_local_cluster()
        server = cluster.url
    try:
        print(
            f"acme floods {args.flood} runs ({args.step_seconds} s each), then globex posts one; "
            f"concurrency=2, 1 worker, poll {args.poll} s",
            flush=True,
        )
        print(f"{'queue':<40} {'globex waited':>14} {'overtook':>9}", flush=True)
        for label, extra in (
            ("one order (no tenant_concurrency)", ""),
            ("tenant_concurrency=1", ",tenant_concurrency=1"),
        ):
            waited, overtaken = measure(
                server, f"helix-runs:concurrency=2,poll={args.poll}{extra}", args.flood, args.step_seconds
            )
            print(f"{label:<40} {waited:>12.3f} s {overtaken:>9}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
