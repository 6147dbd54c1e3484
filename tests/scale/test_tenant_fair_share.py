"""A tenant's fair share of the run queue, in real processes on PostgreSQL (issue 31's proof).

One API server (``serve --no-execute``) with two tenants' tokens (``HELIX_TENANT_TOKENS``) and one
worker, on a queue with ``tenant_concurrency=1``: tenant ``acme`` floods 100 runs, then tenant
``globex`` starts one. Read from DBOS's own records of the runs (``created_at`` is the enqueue,
``dequeued_at`` the worker's claim):

- globex's run is dequeued within about one queue poll of its enqueue, ahead of acme's backlog
  of runs enqueued before it;
- acme never has more than its one run in flight (the runs' own model-call timestamps).

Without the tenant partition (the queue before this change) globex's run waits behind acme's
whole backlog: 100 runs, one at a time here, at ``STEP_SECONDS`` each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from dbos import DBOSClient

from helix_dbos.runtime.launch import dbos_system_database_url
from tests.scale.deployment import Deployment, max_overlap

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]

POLL_SECONDS = 0.2
QUEUE = f"helix-runs:concurrency=2,tenant_concurrency=1,poll={POLL_SECONDS}"
STEP_SECONDS = 0.5
FLOOD = 100
TENANT_TOKENS = {"acme": "acme-token-0123456789", "globex": "globex-token-0123456789"}


@pytest.fixture
def deployment(
    new_migrated_database: Callable[[str], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    url = new_migrated_database("tenants")
    pairs = ",".join(f"{tenant}={token}" for tenant, token in TENANT_TOKENS.items())
    deployment = Deployment(
        url,
        tmp_path_factory.mktemp("tenants"),
        queue=QUEUE,
        workers=1,
        step_seconds=STEP_SECONDS,
        extra_env={"HELIX_TENANT_TOKENS": pairs},
    )
    try:
        yield deployment
    finally:
        deployment.close()


def _client(deployment: Deployment, tenant: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{deployment.port}",
        headers={"Authorization": f"Bearer {TENANT_TOKENS[tenant]}"},
        timeout=30,
    )


def _start(http: httpx.Client, text: str) -> str:
    response = http.post("/v1/runs", json={"agent": "sleeper", "input": text})
    assert response.status_code == 202, response.text
    return str(response.json()["session_id"])


@pytest.mark.parametrize("flood_size", [pytest.param(FLOOD, marks=pytest.mark.slow), 30])
def test_one_tenants_flood_does_not_hold_back_anothers_run(deployment: Deployment, flood_size: int) -> None:
    with _client(deployment, "acme") as acme, _client(deployment, "globex") as globex:
        with ThreadPoolExecutor(max_workers=8) as pool:
            flood = list(pool.map(lambda i: _start(acme, f"flood {flood_size}-{i}"), range(flood_size)))
        waiting = acme.get("/v1/queue").json()["queue"]
        assert waiting["tenant"] == "acme" and waiting["enqueued"] >= flood_size - 10, waiting
        assert globex.get("/v1/queue").json()["queue"]["enqueued"] == 0  # a tenant sees its own share only
        mine = _start(globex, "just one")
        result = globex.get(f"/v1/sessions/{mine}/result", params={"timeout_seconds": 30}).json()
        assert result["status"] == "completed", result
        assert acme.get(f"/v1/sessions/{mine}").status_code == 404  # and acme cannot see it

    client = DBOSClient(system_database_url=dbos_system_database_url(deployment.url))
    try:
        (run,) = client.list_workflows(workflow_ids=[f"{mine}-turn-1"], load_input=False, load_output=False)
        backlog = client.list_workflows(
            workflow_ids=[f"{s}-turn-1" for s in flood], load_input=False, load_output=False
        )
    finally:
        client.destroy()
    assert run.queue_partition_key == "globex"
    assert {w.queue_partition_key for w in backlog} == {"acme"}
    assert run.created_at is not None and run.dequeued_at is not None
    waited_seconds = (run.dequeued_at - run.created_at) / 1000
    print(
        f"globex's run waited {waited_seconds:.3f}s for a worker (poll {POLL_SECONDS}s), behind {flood_size} of acme's"
    )
    # One poll, plus the dequeue's own queries on a loaded machine: far below acme's backlog (~50 s).
    assert waited_seconds <= 2 * POLL_SECONDS + 2.0, waited_seconds
    overtaken = [
        w
        for w in backlog
        if w.created_at is not None
        and w.created_at < run.created_at
        and (w.dequeued_at is None or w.dequeued_at > run.dequeued_at)
    ]
    assert len(overtaken) >= flood_size // 2, len(overtaken)

    acme_calls = [(c["start"], c["end"]) for c in deployment.calls() if c["session_id"] in set(flood)]
    assert acme_calls and max_overlap(acme_calls) == 1  # acme's share: one run in flight at a time
