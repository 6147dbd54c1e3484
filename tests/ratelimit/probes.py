"""What the rate-limit tests look at while runs wait: a condition coming true, and the threads inside a run."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.run_probes import threads_in_runs


def wait_for(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    """Poll ``predicate`` every 20 ms until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def threads_running(run_id: str) -> int:
    """How many threads are inside the agent loop of ``run_id`` right now (from every thread's stack)."""
    return threads_in_runs(lambda request: request.run_id == run_id)
