"""Exactly once across a SIGKILL of the worker at each boundary of a parent awaiting its companion.

The worker (``await_worker.py``) runs ``root``, whose blocking ``clerk`` companion asks the user
(a client tool) and parks after a short hot window, so ``root`` parks ``suspended_awaiting_children``.
The scripted model lives in this process. The worker is killed after the companion parked (before
any answer), after the answer was recorded (before the parent resumed), and during the parent's
continuation; a second worker recovers. Whatever the point, the root completes with the companion's
result in exactly one ``companion__spawnAgent`` result, each session has one suspended run and one
completed run, and the answer is applied to the companion exactly once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.messages import ToolResultMessage
from helix_dbos.testing import ScriptedOpenAIServer
from tests.companions.test_hitl_routing import tree_brain
from tests.pg import unique_name
from tests.worker_process import WorkerProcess, kill_then_recover, start_worker

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("litellm_imported")]

WORKER = Path(__file__).with_name("await_worker.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(new_migrated_database: Callable[[str], str]) -> Iterator[dict[str, Any]]:
    url = new_migrated_database("awaitcrash")
    store = SqlSessionStore(url)
    yield {"url": url, "session": f"aw-{unique_name('s')}", "store": store}
    store.close()


def _spawn(env: dict[str, Any], base_url: str, *, start: bool, answer: bool) -> WorkerProcess:
    args = [env["url"], base_url, env["session"], *(["--start"] if start else []), *(["--answer"] if answer else [])]
    return start_worker(WORKER, args, env={**os.environ, "PYTHONPATH": str(REPO)})


def _parent_parked(env: dict[str, Any]) -> bool:
    run = env["store"].get_current_run(env["session"])
    return run is not None and run.status == "suspended"


def _answered(env: dict[str, Any]) -> bool:
    rows = env["store"].pending.get(f"{env['session']}-agent-clerk")
    return bool(rows) and rows[0].status != "pending"


def _parent_continuing(env: dict[str, Any]) -> bool:
    """The root's continuation run is open (its slow model call is in flight)."""
    runs = env["store"].list_runs(env["session"])
    return len(runs) == 2 and runs[-1].status == "running"


_SLOW = pytest.mark.slow  # about a minute each (two worker launches, a recovery): the default run keeps one


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("point", "answer_first"),
    [
        pytest.param(_parent_parked, False, id="after-the-child-parked"),
        pytest.param(_answered, True, id="after-the-answer", marks=_SLOW),
        pytest.param(_parent_continuing, True, id="during-the-continuation", marks=_SLOW),
    ],
)
def test_a_crash_at_each_boundary_resumes_the_parent_exactly_once(
    env: dict[str, Any], point: Callable[[dict[str, Any]], bool], answer_first: bool
) -> None:
    brain = tree_brain(1)
    root_script = brain.scripts["ROOT"]

    def slow_root(messages: list[dict[str, Any]]) -> dict[str, Any]:
        reply = root_script(messages)
        # The continuation's model call lasts long enough for the kill to land inside it.
        return {**reply, "delay_seconds": 1.5} if any(m["role"] == "tool" for m in messages) else reply

    brain.scripts["ROOT"] = slow_root
    server = ScriptedOpenAIServer(handler=brain)
    base_url = server.start()
    try:
        out = kill_then_recover(
            lambda start: _spawn(env, base_url, start=start, answer=answer_first or not start), lambda: point(env)
        )
    finally:
        server.stop()
    assert "finished completed" in out

    store: SqlSessionStore = env["store"]
    root, clerk = env["session"], f"{env['session']}-agent-clerk"
    assert [r.status for r in store.list_runs(root)] == ["suspended", "completed"]
    assert [r.status for r in store.list_runs(clerk)] == ["suspended", "completed"]
    spawned = [m for m in store.get_messages(root, limit=100).messages if isinstance(m, ToolResultMessage)]
    [only] = [json.loads(m.content) for m in spawned if m.tool_name == "companion__spawnAgent"]
    assert only["status"] == "completed" and "Lyon" in only["output"]["verdict"]
    asked = [m for m in store.get_messages(clerk, limit=100).messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in asked if m.tool_name == "ask_user"] == ["ask-1"]
    session = store.load_session(root)
    assert session is not None and session.output is not None and "Lyon" in session.output["verdict"]
