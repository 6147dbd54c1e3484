"""An admission recorded by the sync admission workflow finishes under today's async one.

The admission workflow became a coroutine (a held slot then waits on DBOS's event loop and holds
no thread). A process of the version before may die while one of its admissions holds a slot; the
upgraded process recovers that admission. Both versions record the same steps under the same
function ids (``set_event``, ``recv`` with its timeout sleep, ``sleep``), so the recovery replays
the recorded announcement, waits for the release and finishes: checked here with a real process
running the old body, SIGKILLed while it holds the slot, on the embedded SQLite default.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dbos import DBOS

from helix_dbos.runtime.launch import APPLICATION_VERSION, dbos_config_for, dbos_system_database_url
from helix_dbos.runtime.rate_limits import ADMISSION_WORKFLOW_NAME, RELEASE_TOPIC, RELEASED

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_an_admission_held_by_the_sync_version_is_recovered_and_released(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/helix.sqlite"
    workflow_id = "run-1-rate-3"
    old = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("sync_admission_process.py")),
            dbos_system_database_url(url),
            APPLICATION_VERSION,
            workflow_id,
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert old.stdout is not None
        assert old.stdout.readline().strip() == "HELD"
    finally:
        old.send_signal(signal.SIGKILL)
        old.wait(timeout=30)

    DBOS.destroy(destroy_registry=False)
    DBOS(config=dbos_config_for(url))
    DBOS.launch()  # recovers the PENDING admission with today's (async) body
    try:
        handle = DBOS.retrieve_workflow(workflow_id)
        time.sleep(0.5)
        assert handle.get_status().status in ("ENQUEUED", "PENDING")  # recovered, its slot held again
        DBOS.send(workflow_id, RELEASED, RELEASE_TOPIC)
        assert handle.get_result() == {"limit": "openai", "released": True}
        steps = [step["function_name"] for step in DBOS.list_workflow_steps(workflow_id)]
        assert steps.count("DBOS.setEvent") == 1, steps  # the announcement replayed, not made again
        (status,) = DBOS.list_workflows(workflow_ids=[workflow_id])
        assert status.name == ADMISSION_WORKFLOW_NAME
    finally:
        DBOS.destroy(destroy_registry=False)
