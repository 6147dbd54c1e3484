"""``BackgroundTasks``: a worker's background thread, on its own (no DBOS, no database)."""

from __future__ import annotations

import threading
from typing import Any

from helix_dbos.runtime.workers import BackgroundTasks


class Recorder:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, Any] | None]] = []

    def debug(self, message: str, data: dict[str, Any] | None = None) -> None: ...

    def info(self, message: str, data: dict[str, Any] | None = None) -> None: ...

    def warn(self, message: str, data: dict[str, Any] | None = None) -> None:
        self.warnings.append((message, data))

    def error(self, message: str, data: dict[str, Any] | None = None) -> None: ...


def test_a_failing_task_is_logged_and_the_round_goes_on() -> None:
    logger = Recorder()
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("database away")

    BackgroundTasks(logger).run_once([("heartbeat", broken), ("sweep", lambda: ran.append("sweep"))])
    assert ran == ["sweep"]
    assert logger.warnings == [("[helix-dbos] heartbeat failed", {"error": "RuntimeError('database away')"})]


def test_the_thread_runs_rounds_until_stopped_and_start_is_idempotent() -> None:
    rounds = threading.Semaphore(0)
    tasks = BackgroundTasks(Recorder())
    tasks.start([("tick", rounds.release)], interval_seconds=0.01)
    tasks.start([("other", lambda: None)], interval_seconds=0.01)  # keeps the first thread
    assert tasks.started
    assert rounds.acquire(timeout=5) and rounds.acquire(timeout=5)  # at least two rounds
    assert tasks.running
    tasks.stop()
    assert not tasks.running


def test_stop_before_start_leaves_no_thread_running() -> None:
    ran: list[int] = []
    tasks = BackgroundTasks(Recorder())
    tasks.stop()
    tasks.start([("tick", lambda: ran.append(1))], interval_seconds=60)
    tasks.stop(timeout_seconds=5)
    assert ran == [1]  # one round, then the remembered stop ends it
    assert tasks.started and not tasks.running
