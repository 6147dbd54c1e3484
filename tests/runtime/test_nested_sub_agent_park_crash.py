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
from collections.abc import Callable

import pytest

from tests.pg import unique_name
from tests.runtime.nested_trees import nested_tree
from tests.worker_process import kill_then_recover

pytestmark = pytest.mark.postgres


def test_the_next_worker_stops_a_parked_child_whose_deadline_died_with_its_worker(
    new_migrated_database: Callable[[str], str],
) -> None:
    with nested_tree(new_migrated_database("nestcrash"), f"nest-{unique_name('s')}", leaf_seconds=60) as tree:
        store, session, mid = tree.store, tree.session, tree.mid

        def mid_parked() -> bool:
            run = store.get_current_run(mid)
            return run is not None and run.status == "suspended"

        out = kill_then_recover(lambda start: tree.worker(4000, 25, *(["--start"] if start else [])), mid_parked)
        state = store.load_state(session)
        assert state is not None and state.status == "completed", out
        assert "timed out" in json.dumps(state.output)
        mid_session = store.load_session(mid)
        assert mid_session is not None and mid_session.status == "failed" and mid_session.aborted
        leaf = store.load_session(f"{mid}-sub-1.1-ask_leaf")
        assert leaf is not None and leaf.status == "failed"
        assert tree.model.calls["mid"] == 1 and tree.model.calls["top"] == 2  # mid never ran again
