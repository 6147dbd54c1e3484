"""A child parked on its own child, past its deadline, after its worker was SIGKILLed (issue 32).

``top`` gives ``mid`` 4 s; ``leaf``'s model call is held 60 s, so with a 0.3 s hot window ``mid``
parks on ``leaf`` and ``top`` on ``mid``. The worker is killed once ``mid`` has parked: the deadline
it kept in memory is gone, and ``mid`` runs nowhere. The next worker recovers ``leaf`` (held again)
and its sweep finds ``mid`` past the deadline ``top``'s reference records: it stops ``mid`` and
``leaf`` under it, and ``top`` completes with the timeout, well before ``leaf`` would have answered
(the worker gives up after 25 s, so waiting for ``leaf`` fails the test).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.runtime.nested_agents import Model
from tests.worker_process import kill_then_recover, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("nested_worker.py")
REPO = Path(__file__).resolve().parents[2]


def test_the_next_worker_stops_a_parked_child_whose_deadline_died_with_its_worker(
    new_migrated_database: Callable[[str], str],
) -> None:
    url, session = new_migrated_database("nestcrash"), f"nest-{unique_name('s')}"
    mid = f"{session}-sub-1.1-ask_mid"
    model = Model(leaf_seconds=60)
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    store = SqlSessionStore(url)

    def mid_parked() -> bool:
        run = store.get_current_run(mid)
        return run is not None and run.status == "suspended"

    env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_HOT_WINDOW_SECONDS": "0.3"}
    try:
        out = kill_then_recover(
            lambda start: start_worker(
                WORKER, [url, base_url, session, "4000", "25", *(["--start"] if start else [])], env=env
            ),
            mid_parked,
        )
        state = store.load_state(session)
        assert state is not None and state.status == "completed", out
        assert "timed out" in json.dumps(state.output)
        mid_session = store.load_session(mid)
        assert mid_session is not None and mid_session.status == "failed" and mid_session.aborted
        leaf = store.load_session(f"{mid}-sub-1.1-ask_leaf")
        assert leaf is not None and leaf.status == "failed"
        assert model.calls["mid"] == 1 and model.calls["top"] == 2  # mid never ran again
    finally:
        store.close()
        server.stop()
