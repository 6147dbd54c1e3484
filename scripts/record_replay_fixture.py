"""Record the runs that ``tests/runtime/test_recorded_runs_recover.py`` finishes with today's code.

Run it with an *older* checkout of helix-dbos on the path, in an empty directory, to capture what
that version leaves in its database when a process dies: the embedded default (SQLite under
``.helix/``) ends up holding

- a run of ``fixture-publish`` parked on an approval (hot window 0: its workflow ended parked), and
- a run of ``fixture-notes`` whose process was SIGKILLed inside its tool call (workflow ``PENDING``,
  the tool's step never recorded).

Then copy ``.helix/`` into ``tests/replay_fixtures/<name>/``. How the committed fixture was made::

    git worktree add /tmp/helix-old <commit> && mkdir /tmp/rec && cd /tmp/rec
    PYTHONPATH=/tmp/helix-old:<this checkout> python <this checkout>/scripts/record_replay_fixture.py
    cp -r .helix <this checkout>/tests/replay_fixtures/<name>

(the older helix-dbos first on the path; this checkout after it only for ``tests.replay_fixtures``).
"""

from __future__ import annotations

import os
import sys
import time

import helix_dbos
from helix_dbos import launch, shutdown
from tests.replay_fixtures.agents import AGENTS, KILL_ENV, FixtureModels, note_agent, publish_agent


def main() -> None:
    print(f"recording with helix-dbos from {os.path.dirname(helix_dbos.__file__)}", flush=True)
    executor = launch(agents=AGENTS, llm_adapter=FixtureModels(), hot_window_seconds=0)
    parked = executor.execute(publish_agent, "Publish the report.", session_id="fixture-parked")
    deadline = time.monotonic() + 30
    while not executor.list_pending_tool_calls("fixture-parked") and time.monotonic() < deadline:
        time.sleep(0.1)
    print(f"parked: {parked.run_id}", flush=True)
    time.sleep(2)  # its workflow has parked (ended) by now
    os.environ[KILL_ENV] = "1"
    handle = executor.execute(note_agent, "Save a note.", session_id="fixture-killed")
    print(f"started: {handle.run_id}; the tool kills this process", flush=True)
    handle.result()
    shutdown(executor)
    sys.exit("the tool did not kill the process")


if __name__ == "__main__":
    main()
