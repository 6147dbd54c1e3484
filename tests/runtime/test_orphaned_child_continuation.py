"""A parked child's continuation recorded by a process that died before starting its workflow.

``top -> mid -> leaf`` with a 0.3 s hot window: ``mid`` parks on ``leaf`` and ``top`` on ``mid``.
When ``leaf`` ends, its worker records ``mid``'s continuation and is SIGKILLed before it starts the
workflow. No parent workflow starts that run (a child's first run is its parent's to start and to
replay, its continuation is not), so the next worker's recovery must start it, as ``mid``'s child
continuation: it then wakes ``top``, which completes with ``leaf``'s answer through ``mid``.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable

import pytest
from dbos import DBOSClient

from helix_dbos.runtime.launch import dbos_system_database_url
from tests.pg import unique_name
from tests.runtime.nested_trees import nested_tree
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.postgres


def test_the_next_worker_starts_a_child_continuation_whose_worker_died_before_starting_it(
    new_migrated_database: Callable[[str], str],
) -> None:
    url = new_migrated_database("orphancont")
    with nested_tree(url, f"orph-{unique_name('s')}", leaf_seconds=1.5) as tree:
        store, session, mid = tree.store, tree.session, tree.mid
        workers: list[WorkerProcess] = []
        try:
            workers.append(tree.worker(0, 60, "--start", "--die-continuing-a-child"))
            workers[0].wait(90)
            assert workers[0].returncode == -signal.SIGKILL, workers[0].output
            orphan = store.get_current_run(mid)
            assert orphan is not None and orphan.mode == "resume" and orphan.status == "running", orphan

            workers.append(tree.worker(0, 40))
            out, _ = workers[1].communicate(timeout=90)
            assert workers[1].returncode == 0 and "finished completed" in out, out
        finally:
            for proc in workers:
                if proc.poll() is None:
                    proc.kill()
        state = store.load_state(session)
        assert state is not None and state.status == "completed"
        assert "leaf says hi" in json.dumps(state.output)
        assert store.load_session(mid).status == "completed"  # type: ignore[union-attr]
        assert tree.model.calls == {"top": 2, "mid": 2, "leaf": 1}
    # Started as mid's continuation, not as a run of its own: its place in the tree kept.
    client = DBOSClient(system_database_url=dbos_system_database_url(url))
    try:
        (started,) = client.list_workflows(workflow_ids=[orphan.workflow_id])
    finally:
        client.destroy()
    request = started.input["args"][0]  # type: ignore[index]
    assert request["parent_session_id"] == session and request["root_session_id"] == session
    assert request["parent_stream_id"] is not None
