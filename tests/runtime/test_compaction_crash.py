"""Replay after a SIGKILL sends the model the same bytes, compaction included (real processes).

The worker (``crash_worker.py --compaction``) runs one run of many tool turns whose view is
compacted and summarised. The scripted server numbers its summaries as it writes them, so a
summary made again after the crash would read differently: the request the recovered worker sends
for the step that was in flight must equal, byte for byte, the one the killed worker sent.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.compaction import SUMMARY_HEADER
from helix_dbos.compaction.policy import DEFAULT_SUMMARY_INSTRUCTIONS
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.worker_process import start_worker, wait_for_crash_point

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("crash_worker.py")
NOTES = 12
HOLD_AT = 9
"""The model call held open (and the worker killed during it): the one after the 9th note."""


def is_summary(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == DEFAULT_SUMMARY_INSTRUCTIONS


class Model:
    """Notes ``NOTES`` lines, one a turn, counted from the last result; holds call ``HOLD_AT`` once."""

    def __init__(self) -> None:
        self.summaries = 0
        self.held = threading.Event()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if is_summary(body):
            self.summaries += 1
            return {"text": f"summary {self.summaries}: notes taken so far"}
        last = body["messages"][-1]
        done = int(json.loads(last["content"])["noted"].split()[0]) if last["role"] == "tool" else 0
        if done == HOLD_AT and not self.held.is_set():
            self.held.set()
            return {"text": "slow", "delay_seconds": 30}
        if done < NOTES:
            text = f"{done + 1} " + "lorem ipsum dolor sit amet " * 3
            return {"tool_calls": [{"id": f"n{done + 1}", "name": "note", "arguments": {"text": text}}]}
        return {"tool_calls": [{"id": "fin", "name": "submit", "arguments": {"answer": "done"}}]}


def test_the_recovered_step_sends_the_bytes_the_killed_one_sent(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    url = new_migrated_database("compactcrash")
    session = f"compact-{unique_name('s')}"
    model = Model()
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    args = [url, base_url, str(tmp_path / "effects.txt"), session, "--compaction"]
    first = start_worker(WORKER, [*args, "--start"])
    try:
        wait_for_crash_point(model.held.is_set, 60, first)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL
        held_index = len(server.requests) - 1
        held = server.requests[held_index]
        second = start_worker(WORKER, args)
        out, _ = second.communicate(timeout=90)
        assert second.returncode == 0, out
        assert "finished completed" in out, out
    finally:
        if first.poll() is None:
            first.kill()
        server.stop()
    after = server.requests[held_index + 1 :]
    assert held["messages"][1]["content"].startswith(SUMMARY_HEADER)  # the held call saw a compacted view
    # Recovery replays the recorded compaction: no summary is made again before the step's re-send ...
    assert not is_summary(after[0])
    # ... and the re-sent request is the very request the killed worker sent.
    assert after[0] == held
    summaries_before = sum(is_summary(b) for b in server.requests[:held_index])
    assert summaries_before >= 1  # the run had compacted, with a summary, before the crash
    store = SqlSessionStore(url)
    try:
        state = store.load_state(session)
        assert state is not None and state.status == "completed"
        assert find_unpaired_tool_call_ids(state.messages) == []
        assert [m.tool_call_id for m in state.messages if m.role == "tool"] == [
            *(f"n{i}" for i in range(1, NOTES + 1)),
            "fin",
        ]
    finally:
        store.close()


def test_a_run_recorded_before_its_agent_had_a_policy_replays_as_recorded(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    """The ``helix-compaction`` replay patch: a worker whose agent has no policy is killed mid-run; a
    worker whose agent has one recovers the run. Where the first worker recorded a model call, the
    second must not record a compaction step (DBOS would refuse it), so the whole run goes on
    without compaction: the held request is re-sent as it was, and nothing is summarised."""
    url = new_migrated_database("compactpatch")
    session = f"compact-{unique_name('p')}"
    model = Model()
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    args = [url, base_url, str(tmp_path / "effects.txt"), session, "--compaction"]
    first = start_worker(WORKER, [*args, "--no-compaction-policy", "--start"])
    try:
        wait_for_crash_point(model.held.is_set, 60, first)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL
        held_index = len(server.requests) - 1
        held = server.requests[held_index]
        second = start_worker(WORKER, args)  # the agent has its policy now
        out, _ = second.communicate(timeout=90)
        assert second.returncode == 0, out
        assert "finished completed" in out, out
    finally:
        if first.poll() is None:
            first.kill()
        server.stop()
    after = server.requests[held_index + 1 :]
    assert after[0] == held  # the recovered step re-sends the recorded, uncompacted request
    assert not any(is_summary(b) for b in server.requests)
    assert not any(m["content"].startswith(SUMMARY_HEADER) for b in after for m in b["messages"] if m.get("content"))
    assert len(after[-1]["messages"]) > 2 * NOTES  # the last call still saw the whole transcript
    store = SqlSessionStore(url)
    try:
        state = store.load_state(session)
        assert state is not None and state.status == "completed"
        assert find_unpaired_tool_call_ids(state.messages) == []
    finally:
        store.close()
