"""The shared body of the crash-test worker processes (``tests/runtime/crash_worker.py``,
``tests/runtime/sub_agent_worker.py``, ``tests/companions/companion_worker.py``,
``tests/memory/memory_worker.py``, ``tests/skills/skill_worker.py``).

Each worker is a real process of the app: it launches helix-dbos on PostgreSQL with its agents,
optionally starts one run, and waits until that session is finished, printing ``started`` and then
``finished <status>`` for the test to read. The test SIGKILLs the first worker at a chosen point
and starts a second one without ``--start``: launching it is what recovers the run. The scripts
differ only in their agents (and tools writing side effects to a file), so only those live in them.

The tests start these scripts with ``tests/worker_process.py``'s ``start_worker`` (a process
forked from a server that has imported this module and what it needs).

A worker that waits past its deadline prints ``timed out`` and exits 3, so a stuck recovery fails
the test with the worker's output instead of hanging it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from helix_dbos import AgentConfig
from helix_dbos.runtime.launch import launch, shutdown

FINISHED = ("completed", "failed")


def append_line(path: str | Path, line: str) -> None:
    """Append one side-effect line to ``path`` (flushed: the process may be killed next)."""
    with Path(path).open("a") as f:
        f.write(line + "\n")
        f.flush()


def serve_session(
    database_url: str,
    agents: Sequence[AgentConfig],
    session_id: str,
    *,
    executor_id: str,
    start: str | None = None,
    deadline_seconds: float = 60,
    poll_seconds: float = 0.05,
    takeover_after_seconds: float = 30.0,
) -> None:
    """Launch on ``database_url``, run ``start`` (the first agent's message) if given, and wait for the session.

    Exits the process with 3 when the session is not finished within ``deadline_seconds``.
    """
    t0 = time.time()
    executor = launch(
        database_url, agents=list(agents), executor_id=executor_id, takeover_after_seconds=takeover_after_seconds
    )
    print(f"launched in {time.time() - t0:.1f}s", flush=True)
    if start is not None:
        executor.execute(agents[0], start, session_id=session_id)
        print("started", flush=True)
    deadline = time.time() + deadline_seconds
    while time.time() < deadline:
        session = executor.store.load_session(session_id)
        if session is not None and session.status in FINISHED:
            print(f"finished {session.status} after {time.time() - t0:.1f}s", flush=True)
            break
        time.sleep(poll_seconds)
    else:
        print("timed out", flush=True)
        shutdown(executor)
        sys.exit(3)
    shutdown(executor)
