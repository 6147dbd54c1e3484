"""A parent parked on its sub-agent children across a worker crash (issue 32): SIGKILL, restart, exactly once.

The worker (``sub_agent_worker.py``) runs with a 0.3 s hot window (``HELIX_HOT_WINDOW_SECONDS``), so
the ``planner`` parks while the held ``snow`` researcher's model call is in flight. The scripted
model lives in this process and counts every call of both workers; the children's ``note`` tool
appends to a file the test counts. After the restart the parent must complete with each child's
result once: each child workflow started once, the parent's continuation started once (two parent
workflows in all), no note written twice.

A run recorded by a version before parking (``--hot-wait-only``: it waited hot and asked no patch)
is recovered by the current worker the old way: it waits hot, however short the window.
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos import SqlSessionStore
from helix_dbos.messages import ToolResultMessage
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.runtime.child_park import CHILD_PARK_PATCH
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.runtime.sub_agent_agents import Model
from tests.worker_process import WorkerProcess, kill_then_recover, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("sub_agent_worker.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(new_migrated_database: Callable[[str], str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    url = new_migrated_database("parkcrash")
    yield {"url": url, "effects": tmp_path / "effects.txt", "session": f"park-{unique_name('s')}"}


def _spawn(env: dict[str, Any], base_url: str, *, start: bool, hot_wait_only: bool = False) -> WorkerProcess:
    args = [
        env["url"],
        base_url,
        env["session"],
        *(["--start"] if start else []),
        *(["--hot-wait-only"] * hot_wait_only),
    ]
    worker_env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HELIX_SUBAGENT_EFFECTS": str(env["effects"]),
        "HELIX_HOT_WINDOW_SECONDS": "0.3",
    }
    return start_worker(WORKER, args, env=worker_env)


def _crash_and_recover(
    env: dict[str, Any], model: Model, kill_when: Callable[[], bool], *, hot_wait_only_first: bool = False
) -> None:
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    try:
        kill_then_recover(
            lambda start: _spawn(env, base_url, start=start, hot_wait_only=start and hot_wait_only_first), kill_when
        )
    finally:
        server.stop()


def _store_read(env: dict[str, Any], read: Callable[[SqlSessionStore], Any]) -> Any:
    store = SqlSessionStore(env["url"])
    try:
        return read(store)
    finally:
        store.close()


def _parent_parked(env: dict[str, Any]) -> bool:
    run = _store_read(env, lambda s: s.get_current_run(env["session"]))
    return run is not None and run.status == "suspended"


def _child_status(env: dict[str, Any], topic: str) -> str | None:
    child = _store_read(env, lambda s: s.load_session(f"{env['session']}-sub-1.1-call_{topic}"))
    return None if child is None else str(child.status)


def _column(env: dict[str, Any], sql: str, params: dict[str, str]) -> list[str]:
    """The first column of ``sql``'s rows, read through the workers' database."""

    def read(store: SqlSessionStore) -> list[str]:
        with store.engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params).scalars())

    result: list[str] = _store_read(env, read)
    return result


def _workflows(env: dict[str, Any]) -> list[str]:
    sql = "SELECT workflow_uuid FROM dbos.workflow_status WHERE workflow_uuid LIKE :p ORDER BY 1"
    return _column(env, sql, {"p": f"{env['session']}-%"})


def _check(env: dict[str, Any], parent_runs: int) -> None:
    """Completed with each child's result once, in call order; each child and continuation started once."""

    def read(store: SqlSessionStore) -> None:
        state = store.load_state(env["session"])
        assert state is not None and state.status == "completed"
        assert [json.loads(s) for s in state.output["summaries"]] == [
            {"summary": "about rain"},
            {"summary": "about snow"},
        ]
        assert find_unpaired_tool_call_ids(state.messages) == []
        results = [m.tool_call_id for m in state.messages if isinstance(m, ToolResultMessage)]
        assert results == ["call_rain", "call_snow", "finish"]
        assert [r.turn for r in store.list_runs(env["session"])] == list(range(1, parent_runs + 1))

    _store_read(env, read)
    session = env["session"]
    parents = [w for w in _workflows(env) if "-sub-" not in w]
    assert parents == [f"{session}-turn-{t}" for t in range(1, parent_runs + 1)]
    children = [w for w in _workflows(env) if "-sub-" in w]
    assert children == [f"{session}-sub-1.1-call_rain-turn-1", f"{session}-sub-1.1-call_snow-turn-1"]
    effects = collections.Counter(env["effects"].read_text().splitlines())
    assert effects == {"note rain": 1, "note snow": 1}


def test_kill_while_the_parent_is_parked_and_its_child_runs(env: dict[str, Any]) -> None:
    model = Model(hold_topic="snow", hold_seconds=30)
    _crash_and_recover(env, model, lambda: model.held.is_set() and _parent_parked(env))
    _check(env, parent_runs=2)
    assert model.calls == {"rain": 2, "snow": 3}  # snow's in-flight call once more, then its finish


def test_kill_right_after_the_child_ended(env: dict[str, Any]) -> None:
    """The kill lands around the wake: the restarted worker's sweep (or the wake that got out) continues it."""
    model = Model(hold_topic="snow", hold_seconds=1.5)
    _crash_and_recover(env, model, lambda: _child_status(env, "snow") == "completed")
    _check(env, parent_runs=2)
    assert model.calls == {"rain": 2, "snow": 2}


def test_a_run_recorded_before_parking_recovers_waiting_hot(env: dict[str, Any]) -> None:
    """Recorded by a version that waited hot (the rain child's wait recorded, snow's in flight): the
    current worker finds that recorded wait where the patch would be asked, so it keeps waiting hot
    past the 0.3 s window and completes in the one run, with no marker of the parking patch in its history."""
    model = Model(hold_topic="snow", hold_seconds=30)
    rain_waited = lambda: model.held.is_set() and "planner.child.wait" in _parent_steps(env)  # noqa: E731
    _crash_and_recover(env, model, rain_waited, hot_wait_only_first=True)
    _check(env, parent_runs=1)
    assert f"DBOS.patch-{CHILD_PARK_PATCH}" not in _parent_steps(env)
    assert model.calls == {"rain": 2, "snow": 3}


def _parent_steps(env: dict[str, Any]) -> list[str]:
    sql = "SELECT function_name FROM dbos.operation_outputs WHERE workflow_uuid = :w"
    return _column(env, sql, {"w": f"{env['session']}-turn-1"})
