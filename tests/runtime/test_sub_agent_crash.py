"""Sub-agents across a worker crash: SIGKILL the worker, restart it, check exactly-once (issue 12).

The worker (``sub_agent_worker.py``) runs the ``planner``, which delegates to two ``researcher``
children in one step; the scripted model lives in this process, so it sees every model call of
both worker processes, and the children's ``note`` tool appends to a file the test counts. After
the restart the parent must complete with each child's result exactly once, no child workflow may
have been started twice, no child tool's side effect may repeat, and no call may dangle.
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
from helix_dbos.runtime.ids import SCOPED_CALL_IDS_PATCH
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.runtime.sub_agent_agents import PLANNER_PROMPT, Model
from tests.worker_process import WorkerProcess, kill_then_recover, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("sub_agent_worker.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(new_migrated_database: Callable[[str], str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    url = new_migrated_database("subcrash")
    yield {"url": url, "effects": tmp_path / "effects.txt", "session": f"sub-{unique_name('s')}"}


def _spawn(env: dict[str, Any], base_url: str, *, start: bool, legacy: bool = False) -> WorkerProcess:
    args = [env["url"], base_url, env["session"], *(["--start"] if start else []), *(["--legacy-call-ids"] * legacy)]
    worker_env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_SUBAGENT_EFFECTS": str(env["effects"])}
    return start_worker(WORKER, args, env=worker_env)


def _effects(env: dict[str, Any]) -> collections.Counter[str]:
    path: Path = env["effects"]
    return collections.Counter(path.read_text().splitlines()) if path.exists() else collections.Counter()


def _crash_and_recover(
    env: dict[str, Any], model: Model, kill_when: Callable[[], bool], *, legacy_first: bool = False
) -> None:
    """Start the run in a worker, kill it when ``kill_when``, recover it in a current worker.

    ``legacy_first``: the first worker derives the children's ids as versions before the turn and
    step were added did (``sub_agent_worker.py --legacy-call-ids``).
    """
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    try:
        kill_then_recover(lambda start: _spawn(env, base_url, start=start, legacy=start and legacy_first), kill_when)
    finally:
        server.stop()


NEW_IDS = "1.1-"
"""The children's call key prefix in a run recorded now: turn 1, step 1 (``ids.scoped_call_key``)."""


def _child_completed(env: dict[str, Any], topic: str, scope: str = NEW_IDS) -> bool:
    store = SqlSessionStore(env["url"])
    try:
        child = store.load_session(f"{env['session']}-sub-{scope}call_{topic}")
        return child is not None and child.status == "completed"
    finally:
        store.close()


def _check(env: dict[str, Any], scope: str = NEW_IDS) -> None:
    """The parent completed with each child's result once; two child workflows; notes once each.

    ``scope`` is what the children's ids carry before the call id (``""``: a run recorded before
    the turn and step were added).
    """
    store = SqlSessionStore(env["url"])
    try:
        state = store.load_state(env["session"])
        assert state is not None and state.status == "completed"
        assert [json.loads(s) for s in state.output["summaries"]] == [
            {"summary": "about rain"},
            {"summary": "about snow"},
        ]
        assert find_unpaired_tool_call_ids(state.messages) == []
        results = [m.tool_call_id for m in state.messages if isinstance(m, ToolResultMessage)]
        assert results == ["call_rain", "call_snow", "finish"]
        with store.engine.connect() as conn:
            workflows = (
                conn.execute(
                    sa.text("SELECT workflow_uuid FROM dbos.workflow_status WHERE workflow_uuid LIKE :p ORDER BY 1"),
                    {"p": f"{env['session']}-sub-%"},
                )
                .scalars()
                .all()
            )
        assert workflows == [
            f"{env['session']}-sub-{scope}call_rain-turn-1",
            f"{env['session']}-sub-{scope}call_snow-turn-1",
        ]
        for topic in ("rain", "snow"):
            child = store.load_state(f"{env['session']}-sub-{scope}call_{topic}")
            assert child is not None and child.status == "completed"
            assert find_unpaired_tool_call_ids(child.messages) == []
            assert [(r.turn, r.status) for r in store.list_runs(child.session_id)] == [(1, "completed")]
    finally:
        store.close()
    assert _effects(env) == {"note rain": 1, "note snow": 1}


def test_kill_while_a_child_runs(env: dict[str, Any]) -> None:
    """The snow researcher's first model call is in flight (and the rain researcher is done) at the kill."""
    model = Model(hold_topic="snow", hold_seconds=30)
    _crash_and_recover(env, model, lambda: model.held.is_set() and _child_completed(env, "rain"))
    _check(env)
    assert model.calls["snow"] == 3  # the in-flight call once more, then its finish
    assert model.calls["rain"] == 2  # rain's recorded steps did not run again


class _HoldParent(Model):
    """Holds the planner's model call after its children's results: the kill comes between them."""

    def __init__(self) -> None:
        super().__init__()
        self.parent_held = False

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        is_parent = PLANNER_PROMPT in str(messages[0]["content"])
        if is_parent and any(m["role"] == "tool" for m in messages) and not self.parent_held:
            self.parent_held = True
            return {"text": "slow", "delay_seconds": 30}
        return super().__call__(body)


def test_kill_between_the_children_finishing_and_the_parents_next_step(env: dict[str, Any]) -> None:
    model = _HoldParent()
    _crash_and_recover(env, model, lambda: model.parent_held)
    _check(env)
    assert model.calls == {"rain": 2, "snow": 2}  # no child ran again


def test_a_run_recorded_with_the_bare_call_ids_recovers_with_them(env: dict[str, Any]) -> None:
    """A worker of a version before the turn and step were added to the children's ids started the
    children and is killed while one runs; the current worker replays the parent to the ids that
    version recorded (the patch finds the recorded ``child.start`` at its position), re-attaches to
    both children and completes the run, recording no patch marker in the old history."""
    model = Model(hold_topic="snow", hold_seconds=30)
    kill_when = lambda: model.held.is_set() and _child_completed(env, "rain", scope="")  # noqa: E731
    _crash_and_recover(env, model, kill_when, legacy_first=True)
    _check(env, scope="")
    assert model.calls == {"rain": 2, "snow": 3}  # rain's recorded steps did not run again
    store = SqlSessionStore(env["url"])
    try:
        [run] = store.list_runs(env["session"])
        with store.engine.connect() as conn:
            steps = conn.execute(
                sa.text("SELECT function_name FROM dbos.operation_outputs WHERE workflow_uuid = :w"),
                {"w": run.workflow_id},
            ).scalars()
            # no marker of the ids patch (the parking patch, asked past the recorded history, may be there)
            assert f"DBOS.patch-{SCOPED_CALL_IDS_PATCH}" not in list(steps)
            # the subagent_end chunks, written after the recovery, name the children as recorded
            chunks = conn.execute(
                sa.text(
                    "SELECT chunk FROM helix_stream_chunks WHERE stream_id = :s AND type IN "
                    "('subagent_start', 'subagent_end') ORDER BY sequence"
                ),
                {"s": env["session"]},
            ).scalars()
            decoded = [c if isinstance(c, dict) else json.loads(c) for c in chunks]
        parent = env["session"]
        named = [(c["type"], c["sub_agent_id"]) for c in decoded if c["agent_id"] == run.run_id]
        assert sorted(named) == sorted(
            (kind, f"{parent}-sub-call_{topic}")
            for kind in ("subagent_start", "subagent_end")
            for topic in ("rain", "snow")
        )
    finally:
        store.close()
