"""A real worker process for the schedule restart test: launch helix-dbos on PostgreSQL and serve schedules.

With ``--create=NAME`` it creates a 1-second schedule of the ``reporter`` agent (a repeat of an
existing one is fine). It prints ``ready`` once launched, then does nothing but run what DBOS's
scheduler and queues hand it, until the test SIGKILLs it.

Usage: python schedule_worker.py DATABASE_URL LLM_BASE_URL EXECUTOR_ID [--create=NAME]
"""

from __future__ import annotations

import contextlib
import sys
import time

from helix_dbos import AgentSchedule
from helix_dbos.errors import ScheduleExistsError
from helix_dbos.runtime.launch import launch
from tests.schedules.agents import reporter

DATABASE_URL, LLM_BASE_URL, EXECUTOR_ID = sys.argv[1:4]
OPTIONS = dict(a[2:].split("=", 1) for a in sys.argv if a.startswith("--") and "=" in a)

executor = launch(DATABASE_URL, agents=[reporter(LLM_BASE_URL)], executor_id=EXECUTOR_ID)
if "create" in OPTIONS:
    with contextlib.suppress(ScheduleExistsError):
        executor.schedules.create(
            AgentSchedule(name=OPTIONS["create"], agent="reporter", cron="* * * * * *", message="Report.")
        )
print("ready", flush=True)
while True:
    time.sleep(1)
