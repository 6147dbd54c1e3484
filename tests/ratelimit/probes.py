"""What the rate-limit tests look at while runs wait: a condition coming true, and the threads inside a run."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    """Poll ``predicate`` every 20 ms until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def threads_running(run_id: str) -> int:
    """How many threads are inside the agent loop of ``run_id`` right now (from every thread's stack)."""
    found = 0
    for frame in sys._current_frames().values():
        walked = frame
        while walked is not None:
            request = walked.f_locals.get("request") if walked.f_code.co_name == "run_agent_loop" else None
            if request is not None and getattr(request, "run_id", None) == run_id:
                found += 1
                break
            walked = walked.f_back
    return found
