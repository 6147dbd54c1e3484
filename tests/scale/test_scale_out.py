"""Scale-out on a DBOS queue, in real processes on PostgreSQL: one API server, three workers.

The API server (``serve --no-execute``) only enqueues; the workers run. Proven from the runs' own
timestamps (each model call logs its worker and its start and end, ``tests/scale/agents.py``):

- 60 runs submitted over HTTP are spread over the three workers, and the queue's global cap on
  runs in flight is never exceeded, while one worker is SIGKILLed mid-load: every run completes,
  once (one answer in its transcript, one successful workflow);
- priorities reorder a backlog: high-priority runs submitted after a backlog start before most of it;
- ``GET /v1/queue`` shows depth and per-worker load.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from dbos import DBOSClient

from helix_dbos.runtime.launch import dbos_system_database_url
from helix_dbos.store import SqlSessionStore
from tests.scale.deployment import REPO, Deployment, max_overlap

pytestmark = pytest.mark.postgres

CAP = 4
QUEUE = f"helix-runs:concurrency={CAP},worker_concurrency=2,poll=0.02"
STEP_SECONDS = 0.3


@pytest.fixture(scope="module")
def deployment(
    new_migrated_database: Callable[[str], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    url = new_migrated_database("scale")
    deployment = Deployment(url, tmp_path_factory.mktemp("scale"), queue=QUEUE, workers=3, step_seconds=STEP_SECONDS)
    try:
        yield deployment
    finally:
        deployment.close()


def test_runs_spread_under_the_cap_and_survive_a_killed_worker(deployment: Deployment) -> None:
    sessions = [deployment.start_run(f"run {i}") for i in range(30)]
    # Kill a worker once it has run some and while a run is in flight on it.
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, deployment.logs()
        status = deployment.queue_status()
        in_flight = status["queue"]["running_by_worker"].get("w3", 0)
        if in_flight and any(c["executor_id"] == "w3" for c in deployment.calls()):
            break
    assert status["queued"] is True and status["queue"]["concurrency"] == CAP
    deployment.workers["w3"].kill()
    sessions += [deployment.start_run(f"run {i}") for i in range(30, 60)]
    deployment.wait_done(sessions)

    calls = [c for c in deployment.calls() if c["session_id"] in set(sessions)]
    by_worker = Counter(c["executor_id"] for c in calls)
    assert set(by_worker) == {"w1", "w2", "w3"}, by_worker  # each worker ran some
    assert max_overlap([(c["start"], c["end"]) for c in calls]) == CAP  # reached, never exceeded
    takeovers = [p.output() for p in (deployment.workers["w1"], deployment.workers["w2"])]
    assert any("took over runs of dead workers" in out for out in takeovers), deployment.logs()

    store = SqlSessionStore(deployment.url)
    try:
        for session_id in sessions:
            state = store.load_state(session_id)
            assert state is not None and state.status == "completed"
            answers = [m for m in state.messages if m.role == "assistant"]
            assert len(answers) == 1, state.messages  # completed once
            assert [r.status for r in store.list_runs(session_id)] == ["completed"]
    finally:
        store.close()
    # At the DBOS level too: one successful workflow per run, still on the run queue (the killed
    # worker's runs were put back on it, not on DBOS's internal queue, so the cap held for them).
    client = DBOSClient(system_database_url=dbos_system_database_url(deployment.url))
    try:
        statuses = client.list_workflows(workflow_ids=[f"{s}-turn-1" for s in sessions], load_input=False)
    finally:
        client.destroy()
    assert len(statuses) == 60
    assert {(w.status, w.queue_name) for w in statuses} == {("SUCCESS", "helix-runs")}
    idle = deployment.queue_status()["queue"]
    assert idle["enqueued"] == 0 and idle["running"] == 0, idle


def test_priorities_reorder_a_backlog(deployment: Deployment) -> None:
    with ThreadPoolExecutor(8) as pool:  # a backlog, quickly: far more runs than the cap
        low = list(pool.map(lambda i: deployment.start_run(f"low {i}", priority=100), range(24)))
    high = [deployment.start_run(f"high {i}", priority=1) for i in range(4)]
    all_queued_at = time.time()
    deployment.wait_done(low + high)
    starts = {c["session_id"]: c["start"] for c in deployment.calls()}
    # The low runs still waiting once every high run was queued: first come, first served would
    # start all of them before the high ones (they were submitted first); priorities start the
    # high ones first (one low run may race the last high one across workers).
    waiting = [s for s in low if starts[s] > all_queued_at]
    assert len(waiting) >= 4, "no backlog left to reorder: the test proves nothing"
    last_high = max(starts[s] for s in high)
    overtaken = [s for s in waiting if starts[s] < last_high]
    assert len(overtaken) <= 1, sorted((starts[s], "high" if s in high else "low") for s in low + high)


def test_queue_status_names_the_workers(deployment: Deployment) -> None:
    sessions = [deployment.start_run(f"load {i}") for i in range(8)]
    seen: set[str] = set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not seen:
        seen = set(deployment.queue_status()["queue"]["running_by_worker"])
    cli = subprocess.run(
        [sys.executable, "-m", "helix_dbos.cli", "queue-status", "--queue", QUEUE, "--database-url", deployment.url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    deployment.wait_done(sessions)
    assert seen and seen <= {"w1", "w2"}, seen
    assert cli.returncode == 0 and "queue helix-runs:" in cli.stdout, cli.stdout + cli.stderr


def test_a_restarted_worker_puts_its_runs_back_on_the_queue(
    new_migrated_database: Callable[[str], str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """DBOS's own recovery (same executor id, no takeover): the runs go back to the run queue."""

    url = new_migrated_database("scale_restart")
    workdir = tmp_path_factory.mktemp("restart")
    deployment = Deployment(url, workdir, queue=QUEUE, workers=2, step_seconds=1.0, takeover_after=600)
    try:
        sessions = [deployment.start_run(f"r {i}") for i in range(6)]
        deadline = time.monotonic() + 60
        while not deployment.queue_status()["queue"]["running_by_worker"].get("w1"):
            assert time.monotonic() < deadline, deployment.logs()
            time.sleep(0.02)
        deployment.workers["w1"].kill()
        deployment.start_worker("w1")  # the same executor id: DBOS recovers its runs at launch
        deployment.wait_done(sessions)
        client = DBOSClient(system_database_url=dbos_system_database_url(url))
        try:
            statuses = client.list_workflows(workflow_ids=[f"{s}-turn-1" for s in sessions], load_input=False)
        finally:
            client.destroy()
        assert {(w.status, w.queue_name) for w in statuses} == {("SUCCESS", "helix-runs")}
        assert any(w.recovery_attempts and w.recovery_attempts > 1 for w in statuses)  # some were recovered
    finally:
        deployment.close()
