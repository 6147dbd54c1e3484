"""A process running the admission workflow as helix-dbos recorded it before it was async.

Used by ``test_admission_upgrade.py``: it starts one admission under a given workflow id on a SQLite
system database, waits until the admission is announced (its slot is held), prints ``HELD`` and
then waits to be killed. Only ``dbos`` is imported: helix-dbos would register today's admission
workflow under the same name.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from dbos import DBOS, SetWorkflowID

ADMISSION_WORKFLOW_NAME = "helix_dbos.model_admission"
ADMITTED_EVENT = "helix.admitted"
RELEASE_TOPIC = "helix.release"


@DBOS.workflow(name=ADMISSION_WORKFLOW_NAME)
def admission_workflow(limit_name: str, hold_timeout_s: float, after_release_s: float) -> dict[str, Any]:
    """The sync admission, body unchanged from the version before (see ``runtime/rate_limits.py``)."""
    DBOS.set_event(ADMITTED_EVENT, limit_name)
    if hold_timeout_s <= 0:
        return {"limit": limit_name, "released": False}
    released = DBOS.recv(RELEASE_TOPIC, timeout_seconds=hold_timeout_s)
    if after_release_s > 0:
        DBOS.sleep(after_release_s)
    return {"limit": limit_name, "released": released is not None}


def main() -> None:
    system_url, application_version, workflow_id = sys.argv[1:4]
    DBOS(
        config={
            "name": "helix-dbos",
            "system_database_url": system_url,
            "application_version": application_version,
            "executor_id": "local",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()
    with SetWorkflowID(workflow_id):
        DBOS.start_workflow(admission_workflow, "openai", 120.0, 0.5)
    while DBOS.get_event(workflow_id, ADMITTED_EVENT, timeout_seconds=1) is None:
        pass
    print("HELD", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
