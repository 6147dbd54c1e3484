"""A worker SIGKILLed during a companion re-consult (issue 12, crash test (c)).

The worker (``companion_worker.py``) runs on PostgreSQL and calls the scripted OpenAI-compatible
server in this process through the real LiteLLM adapter. The writer consults the critic, then
re-consults it (``companion__sendMessage``), which continues the critic's session as the workflow
``{critic session}-continue-1.2-c2`` (the writer's turn 1, step 2, call ``c2``). The worker is
killed while that continuation runs: (a) inside the critic's tool, (b) while the critic's model
call after the tool is in flight. A second worker recovers both workflows; the writer must
complete with both verdicts, each exactly once.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos import SqlSessionStore
from helix_dbos.messages import ToolResultMessage, UserMessage
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.runtime.launch import dbos_system_database_url
from helix_dbos.testing import ScriptedOpenAIServer
from tests.companions.brain import Brain, call, tool_results, users
from tests.pg import unique_name
from tests.worker_process import WorkerProcess, kill_then_recover, start_worker

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]  # two worker processes, each importing LiteLLM

WORKER = Path(__file__).with_name("companion_worker.py")
REPO = Path(__file__).resolve().parents[2]


def writer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    results = tool_results(messages)
    if not results:
        return call(
            "companion__spawnAgent", {"agentType": "crash-critic", "name": "critic", "message": "draft one"}, "c1"
        )
    if len(results) == 1:
        return call("companion__sendMessage", {"name": "critic", "message": "draft two"}, "c2")
    return call("__finish__", {"verdicts": [r["output"]["verdict"] for r in results]}, "done")


class Critic:
    """Records each consult with its tool, then judges it; can hold the re-consult's verdict call."""

    def __init__(self, hold_round_two: bool = False) -> None:
        self.hold = hold_round_two
        self.held = threading.Event()

    def __call__(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        asks, done = users(messages), len(tool_results(messages))
        n = len(asks)
        if done < n * 2 - 1:  # each consult: record (one result), then __finish__ (its ack follows)
            return call("record", {"text": asks[-1]}, f"r{n}")
        if self.hold and n == 2 and not self.held.is_set():
            self.held.set()
            return {"text": "thinking", "delay_seconds": 30}
        return call("__finish__", {"verdict": f"verdict {n} on {asks[-1]}", "round": n}, f"fin{n}")


@pytest.fixture
def env(new_migrated_database: Callable[[str], str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    url = new_migrated_database("companion_crash")
    yield {"url": url, "effects": tmp_path / "effects.txt", "session": f"cc-{unique_name('s')}"}


def _spawn(env: dict[str, Any], base_url: str, *, start: bool) -> WorkerProcess:
    args = [env["url"], base_url, str(env["effects"]), env["session"]]
    return start_worker(WORKER, [*args, "--start"] if start else args)


def _effects(env: dict[str, Any]) -> collections.Counter[str]:
    path: Path = env["effects"]
    return collections.Counter(path.read_text().splitlines()) if path.exists() else collections.Counter()


def _crash_and_recover(env: dict[str, Any], critic: Critic, kill_when: Callable[[], bool]) -> Brain:
    brain = Brain({"WRITER": writer, "CRITIC": critic})
    server = ScriptedOpenAIServer(handler=brain)
    base_url = server.start()
    try:
        kill_then_recover(lambda start: _spawn(env, base_url, start=start), kill_when)
    finally:
        server.stop()
    return brain


def _continuations(url: str) -> list[str]:
    engine = sa.create_engine(dbos_system_database_url(url).replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT workflow_uuid FROM dbos.workflow_status WHERE workflow_uuid LIKE '%-continue-%'")
            )
            return [r.workflow_uuid for r in rows]
    finally:
        engine.dispose()


def _check(env: dict[str, Any]) -> None:
    session, child = env["session"], f"{env['session']}-agent-critic"
    store = SqlSessionStore(env["url"])
    try:
        parent = store.load_state(session)
        assert parent is not None and parent.status == "completed"
        assert parent.output == {"verdicts": ["verdict 1 on draft one", "verdict 2 on draft two"]}
        assert find_unpaired_tool_call_ids(parent.messages) == []
        answered = [m.tool_call_id for m in parent.messages if isinstance(m, ToolResultMessage)]
        assert answered == ["c1", "c2", "done"]  # the child's result reached the parent once
        c2 = json.loads(
            next(m.content for m in parent.messages if isinstance(m, ToolResultMessage) and m.tool_call_id == "c2")
        )
        assert c2["status"] == "completed" and c2["output"]["round"] == 2
        state = store.load_state(child)
        assert state is not None and state.status == "completed"
        assert find_unpaired_tool_call_ids(state.messages) == []
        assert [m.content for m in state.messages if isinstance(m, UserMessage)] == ["draft one", "draft two"]
        runs = store.list_runs(child)
        assert [(r.workflow_id, r.status) for r in runs] == [
            (f"{child}-turn-1", "completed"),
            (f"{child}-continue-1.2-c2", "completed"),
        ]
    finally:
        store.close()
    assert _continuations(env["url"]) == [f"{child}-continue-1.2-c2"]  # started once, by its one id


def test_kill_inside_the_companions_tool_during_a_reconsult(env: dict[str, Any]) -> None:
    _crash_and_recover(env, Critic(), lambda: _effects(env)["start:draft two"] >= 1)
    effects = _effects(env)
    assert effects["append:draft one"] == 1  # the first consult's tool did not run again
    assert effects["append:draft two"] == 1 and effects["start:draft two"] == 2  # the in-flight step, once more
    _check(env)


def test_kill_while_the_reconsulted_companion_calls_its_model(env: dict[str, Any]) -> None:
    critic = Critic(hold_round_two=True)
    brain = _crash_and_recover(env, critic, critic.held.is_set)
    effects = _effects(env)
    assert effects == collections.Counter(
        {"start:draft one": 1, "append:draft one": 1, "start:draft two": 1, "append:draft two": 1}
    )  # no tool of the companion ran twice
    assert len(brain.requests["WRITER"]) == 3  # no model call of the parent repeated
    _check(env)
