"""Which threads are inside an agent run right now, from every thread's stack (tests and benchmarks).

A run holds a thread while its workflow runs and none while it is parked; these probes say which,
without any hook in the runtime: a thread is inside a run while a frame of ``run_agent_loop`` is on
its stack, and that frame's ``request`` names the run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def threads_in_runs(matches: Callable[[Any], bool]) -> int:
    """How many threads are inside a run whose ``RunRequest`` ``matches``."""
    found = 0
    for frame in sys._current_frames().values():
        walked = frame
        while walked is not None:
            request = walked.f_locals.get("request") if walked.f_code.co_name == "run_agent_loop" else None
            if request is not None and matches(request):
                found += 1
                break
            walked = walked.f_back
    return found


__all__ = ["threads_in_runs"]
