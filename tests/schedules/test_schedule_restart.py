"""The proof of scheduled agents across a crash: real worker processes, SIGKILLed and started again.

A 1-second schedule is created by worker A. A is SIGKILLed after a few fires, stays down for about
two seconds, and worker B (same executor id, as a restarted process has) is launched: DBOS catches
the schedule up from its last fire (the ``run_each`` missed-fire policy) and fires on. B is
SIGKILLed in turn; the test then pauses the schedule and a third process drains what B left
enqueued or in flight. Counted by ids afterwards: every second from the first fire to B's death
has exactly one fire (N fires in N seconds, +-1 for the fire due as B died), none twice, and each
fire exactly one completed run in its own session.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dbos import DBOSClient

from helix_dbos import SqlSessionStore
from helix_dbos.runtime.launch import dbos_system_database_url
from helix_dbos.runtime.schedules import ScheduleBook, ScheduleFire
from helix_dbos.testing import ScriptedOpenAIServer
from tests.worker_process import WorkerProcess, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("schedule_worker.py")
NAME = "heartbeat"


def _until(what: str, check: Callable[[], bool], proc: WorkerProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert proc.poll() is None, f"worker exited while waiting for {what}: {proc.output}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {proc.output}"
        time.sleep(0.05)


def _ran(book: ScheduleBook) -> list[ScheduleFire]:
    return [f for f in book.fires(NAME, limit=1000) if f.outcome is not None]


def test_a_1s_schedule_fires_n_times_in_n_seconds_across_a_sigkilled_worker(
    new_migrated_database: Callable[[str], str], llm: ScriptedOpenAIServer
) -> None:
    url = new_migrated_database("schedkill")
    args = [url, llm.base_url, "schedule-worker"]
    client = DBOSClient(system_database_url=dbos_system_database_url(url), application_name="helix-dbos")
    book = ScheduleBook(client)
    procs: list[WorkerProcess] = []
    try:
        a = start_worker(WORKER, [*args, f"--create={NAME}"])
        procs.append(a)
        _until("worker A", lambda: "ready" in a.output, a)
        _until("three fires", lambda: len(_ran(book)) >= 3, a)
        a.kill()
        a.wait(10)
        killed_at = datetime.now(UTC)
        time.sleep(2.0)
        b = start_worker(WORKER, args)
        procs.append(b)
        _until("worker B", lambda: "ready" in b.output, b)
        restarted_at = datetime.now(UTC)
        later = restarted_at + timedelta(seconds=2)
        _until(
            "fires after the restart", lambda: any(datetime.fromisoformat(f.fire_time) > later for f in _ran(book)), b
        )
        b.kill()
        b.wait(10)
        ended_at = datetime.now(UTC)
        book.pause(NAME)  # the drain below must not fire on
        c = start_worker(WORKER, args)
        procs.append(c)
        _until("B's fires drained", lambda: all(f.outcome for f in book.fires(NAME, limit=1000)), c)

        fires = book.fires(NAME, limit=1000)
        times = sorted(datetime.fromisoformat(f.fire_time) for f in fires)
        assert len(set(times)) == len(times) == len({f.fire_id for f in fires})
        gaps = [b - a for a, b in itertools.pairwise(times)]
        holes = [a.isoformat() for a, gap in zip(times, gaps, strict=False) if gap > timedelta(seconds=1)]
        assert all(gap == timedelta(seconds=1) for gap in gaps), (holes, killed_at, restarted_at, times[0], times[-1])
        assert any(killed_at < t < restarted_at for t in times), "the downtime's fires were not run"
        seconds = (ended_at - times[0]).total_seconds()
        assert abs(len(times) - seconds) <= 1, (len(times), seconds)

        with SqlSessionStore(url) as store:
            sessions = [s for s in store.list_sessions(limit=10_000) if s.session_id.startswith(f"schedule-{NAME}-")]
            deadline = time.monotonic() + 30
            while any(store.load_session(s.session_id).status == "active" for s in sessions):  # type: ignore[union-attr]
                assert time.monotonic() < deadline, c.output
                time.sleep(0.1)
            outcomes = {f.outcome.session_id for f in fires if f.outcome and f.outcome.status == "started"}
            assert outcomes == {s.session_id for s in sessions} and len(sessions) == len(times)
            for session in sessions:
                runs = store.list_runs(session.session_id)
                assert [r.status for r in runs] == ["completed"], (session.session_id, runs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        client.destroy()
