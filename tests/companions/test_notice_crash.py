"""A worker SIGKILLed while a non-blocking companion's notice is on its way to the model (issue 12).

The lead (``notice_worker.py``) spawns a non-blocking ``monitor`` and pauses until the monitor's
completion notice arrives. The notice is appended just before the lead's next model call and
committed by that call's step; the worker is killed while that very model call is in flight
(notice written, step not yet checkpointed). A second worker recovers the lead: the notice must
be in its transcript exactly once, the model must see it exactly once per call, the monitor must
not run again, and no call may dangle.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.messages import ToolResultMessage, UserMessage
from helix_dbos.orchestration.companions import NOTICE_METADATA_KEY
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.testing import ScriptedOpenAIServer
from tests.companions.brain import Brain, call, tool_results, users
from tests.pg import unique_name
from tests.worker_process import WorkerProcess, kill_then_recover, start_worker

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]  # two worker processes, each importing LiteLLM


WORKER = Path(__file__).with_name("notice_worker.py")
REPO = Path(__file__).resolve().parents[2]


def _notices_seen(messages: list[dict[str, Any]]) -> int:
    return sum(1 for text in users(messages) if text.startswith("[Companion"))


class Lead:
    """Spawn the monitor, pause until its notice, then finish; the first call that sees it is held."""

    def __init__(self) -> None:
        self.held = threading.Event()

    def __call__(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        results = tool_results(messages)
        if not results:
            return call("companion__spawnAgent", {"agentType": "monitor", "message": "watch"}, "s1")
        if not _notices_seen(messages):
            return call("pause", {"seconds": 0.2}, f"p{len(results)}")
        if not self.held.is_set():
            self.held.set()
            return {"text": "thinking", "delay_seconds": 30}
        notices = [t for t in users(messages) if t.startswith("[Companion")]
        return call("__finish__", {"verdicts": notices}, "done")


def monitor(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {**call("__finish__", {"verdict": "all quiet", "round": 1}, "mf"), "delay_seconds": 0.5}


@pytest.fixture
def env(new_migrated_database: Callable[[str], str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    url = new_migrated_database("notice_crash")
    yield {"url": url, "effects": tmp_path / "effects.txt", "session": f"nc-{unique_name('s')}"}


def _spawn(env: dict[str, Any], base_url: str, *, start: bool) -> WorkerProcess:
    args = [env["url"], base_url, str(env["effects"]), env["session"]]
    return start_worker(WORKER, [*args, "--start"] if start else args)


def test_kill_while_the_model_call_carrying_a_notice_is_in_flight(env: dict[str, Any]) -> None:
    lead = Lead()
    brain = Brain({"LEAD": lead, "MONITOR": monitor})
    server = ScriptedOpenAIServer(handler=brain)
    base_url = server.start()
    try:
        kill_then_recover(lambda start: _spawn(env, base_url, start=start), lead.held.is_set)
    finally:
        server.stop()

    session, child = env["session"], f"{env['session']}-agent-monitor-1"
    store = SqlSessionStore(env["url"])
    try:
        state = store.load_state(session)
        assert state is not None and state.status == "completed"
        assert find_unpaired_tool_call_ids(state.messages) == []
        notices = [
            m.metadata[NOTICE_METADATA_KEY]
            for m in state.messages
            if isinstance(m, UserMessage) and m.metadata and NOTICE_METADATA_KEY in m.metadata
        ]
        assert notices == [{"name": "monitor-1", "sessionId": child, "runId": f"{child}-turn-1", "status": "completed"}]
        assert len(state.output["verdicts"]) == 1 and "all quiet" in state.output["verdicts"][0]
        assert [(r.workflow_id, r.status) for r in store.list_runs(child)] == [(f"{child}-turn-1", "completed")]
        paused = [m for m in state.messages if isinstance(m, ToolResultMessage) and m.tool_call_id.startswith("p")]
    finally:
        store.close()
    # the monitor ran once; every lead call after the notice saw it exactly once (the held one, then its re-run)
    assert len(brain.requests["MONITOR"]) == 1
    seen = [_notices_seen(r) for r in brain.requests["LEAD"]]
    assert seen[-1] == 1 and set(seen) == {0, 1} and seen.count(1) == 2
    assert paused and collections.Counter(env["effects"].read_text().splitlines()) == {"pause": len(paused)}
