"""``double_text="enqueue"``: a worker SIGKILLed while the first run is in flight, with two messages
queued behind it, loses neither. The next worker finishes the first run and runs the queued
messages as the next turns, in the order they were posted, each once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.worker_process import WorkerProcess, kill_then_recover, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("double_text_worker.py")
REPO = Path(__file__).resolve().parents[2]


def decide(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"text": f"done: {json.loads(last['content'])['did']}"}
    return {"tool_calls": [("work", {"text": last["content"]})]}


def test_sigkill_with_messages_enqueued_loses_none(new_migrated_database: Callable[[str], str], tmp_path: Path) -> None:
    url = new_migrated_database("dtcrash")
    effects = tmp_path / "effects.txt"
    session_id = f"dt-{unique_name('s')}"

    def spawn(start: bool) -> WorkerProcess:
        args = [url, base_url, str(effects), session_id, *(["--start"] if start else [])]
        return start_worker(WORKER, args, env={**os.environ, "PYTHONPATH": str(REPO)})

    def first_tool_done() -> bool:
        return effects.exists() and "did:first" in effects.read_text()

    with ScriptedOpenAIServer(handler=decide) as server:
        base_url = server.base_url
        kill_then_recover(spawn, first_tool_done)

    store = SqlSessionStore(url)
    try:
        runs = store.list_runs(session_id)
        assert [(r.run_id, r.status) for r in runs] == [(f"{session_id}-turn-{n}", "completed") for n in (1, 2, 3)]
        state = store.load_state(session_id)
        assert state is not None
        users = [m.content for m in state.messages if m.role == "user"]
        assert users == ["first", "second", "third"]
        answers = [m.content for m in state.messages if m.role == "assistant" and not m.tool_calls]
        assert answers == ["done: first", "done: second", "done: third"]
    finally:
        store.close()
    lines = effects.read_text().splitlines()
    assert lines.count("did:second") == 1 and lines.count("did:third") == 1
