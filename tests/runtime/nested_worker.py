"""A real worker process for the nested park crash test: ``top -> mid -> leaf`` on PostgreSQL.

``top``'s tool gives ``mid`` ``MID_TIMEOUT_MS``; the model (in the test's process) holds ``leaf``.
The worker waits at most ``DEADLINE_SECONDS`` for the session (then prints ``timed out``).

Usage: python nested_worker.py DATABASE_URL LLM_BASE_URL SESSION_ID MID_TIMEOUT_MS DEADLINE_SECONDS [--start]
"""

from __future__ import annotations

import sys

from tests.runtime.nested_agents import tree
from tests.worker_harness import serve_session

DATABASE_URL, LLM_BASE_URL, SESSION_ID, MID_TIMEOUT_MS, DEADLINE_SECONDS = sys.argv[1:6]

serve_session(
    DATABASE_URL,
    [tree(LLM_BASE_URL, mid_timeout_ms=int(MID_TIMEOUT_MS))],
    SESSION_ID,
    executor_id="nested-worker",
    start="go" if "--start" in sys.argv else None,
    deadline_seconds=float(DEADLINE_SECONDS),
)
