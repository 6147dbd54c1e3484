"""A parked child's continuation recorded by a process that died before starting its workflow.

``top -> mid -> leaf`` with a 0.3 s hot window: ``mid`` parks on ``leaf`` and ``top`` on ``mid``.
When ``leaf`` ends, its worker records ``mid``'s continuation and is SIGKILLed before it starts the
workflow. No parent workflow starts that run (a child's first run is its parent's to start and to
replay, its continuation is not), so the next worker's recovery must start it, as ``mid``'s child
continuation: it then wakes ``top``, which completes with ``leaf``'s answer through ``mid``.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from dbos import DBOSClient

from helix_dbos import SqlSessionStore
from helix_dbos.runtime.launch import dbos_system_database_url
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.runtime.nested_agents import Model
from tests.worker_process import start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("nested_worker.py")
REPO = Path(__file__).resolve().parents[2]


def test_the_next_worker_starts_a_child_continuation_whose_worker_died_before_starting_it(
    new_migrated_database: Callable[[str], str],
) -> None:
    url, session = new_migrated_database("orphancont"), f"orph-{unique_name('s')}"
    mid = f"{session}-sub-1.1-ask_mid"
    model = Model(leaf_seconds=1.5)
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    store = SqlSessionStore(url)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_HOT_WINDOW_SECONDS": "0.3"}
    second = None
    first = start_worker(WORKER, [url, base_url, session, "0", "60", "--start", "--die-continuing-a-child"], env=env)
    try:
        first.wait(90)
        assert first.returncode == -signal.SIGKILL, first.output
        orphan = store.get_current_run(mid)
        assert orphan is not None and orphan.mode == "resume" and orphan.status == "running", orphan

        second = start_worker(WORKER, [url, base_url, session, "0", "40"], env=env)
        out, _ = second.communicate(timeout=90)
        assert second.returncode == 0 and "finished completed" in out, out
        state = store.load_state(session)
        assert state is not None and state.status == "completed"
        assert "leaf says hi" in json.dumps(state.output)
        assert store.load_session(mid).status == "completed"  # type: ignore[union-attr]
        assert model.calls["leaf"] == 1 and model.calls["mid"] == 2 and model.calls["top"] == 2
        # Started as mid's continuation, not as a run of its own: its place in the tree kept.
        client = DBOSClient(system_database_url=dbos_system_database_url(url))
        try:
            (started,) = client.list_workflows(workflow_ids=[orphan.workflow_id])
        finally:
            client.destroy()
        request = started.input["args"][0]  # type: ignore[index]
        assert request["parent_session_id"] == session and request["root_session_id"] == session
        assert request["parent_stream_id"] is not None
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
        store.close()
        server.stop()
