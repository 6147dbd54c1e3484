"""A run whose HITL steps were recorded by an older version recovers under the current code.

Checks now park, the registration takes the first check, and ``hitl.resumed`` runs only when a hook
set defines ``on_agent_resumed``: a different step sequence. The sequence a run takes follows what
its steps recorded (``helix_dbos.runtime.hitl.await_answers``), so a worker running the old
sequence (``crash_worker.py --legacy-hitl-steps``) is SIGKILLed mid-run and a current worker
recovers it: it must replay the old steps and finish, not fail on an unexpected step name.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from helix_dbos import LiteLLMAdapter
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.runtime.crash_agents import hitl_agent
from tests.worker_process import WorkerProcess, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("crash_worker.py")
REPO = Path(__file__).resolve().parents[2]


def _spawn(url: str, base_url: str, effects: Path, session: str, *extra: str) -> WorkerProcess:
    return start_worker(WORKER, [url, base_url, str(effects), session, "--hitl", *extra])


@pytest.mark.parametrize(
    ("flags", "tail", "checks"),
    [
        (("--legacy-hitl-steps",), ["DBOS.sleep", "hitl-crash-agent.hitl.check", "hitl-crash-agent.hitl.resumed"], 2),
        ((), ["hitl-crash-agent.hitl.register", "DBOS.recv", "DBOS.sleep"], 0),
    ],
    ids=["old-steps", "answer-in-wake-up"],
)
def test_a_run_recorded_with_the_old_hitl_steps_recovers_under_the_new_ones(
    runtime_db: str, make_executor: Any, tmp_path: Path, flags: tuple[str, ...], tail: list[str], checks: int
) -> None:
    """Old sequence recorded up to the model call after the answer (register, check, recv, check,
    resumed, llm in flight); the current worker replays it and completes the run. The old worker
    received the answer in its wake-up too (the submitter is current) and checked the store anyway.
    The current sequence (register, recv carrying the answer, llm in flight) replays the same way."""
    held = threading.Event()

    def model(body: dict[str, Any]) -> dict[str, Any]:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return {"tool_calls": [{"id": "loc1", "name": "get_location", "arguments": {"text": "?"}}]}
        if not held.is_set():  # the first model call after the answer: kill the worker during it
            held.set()
            return {"text": "slow", "delay_seconds": 30}
        return {"tool_calls": [{"id": "fin", "name": "__finish__", "arguments": {"answer": results[0]["content"]}}]}

    session = f"hitl-legacy-{unique_name('s')}"
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    submitter = make_executor(LiteLLMAdapter(), [hitl_agent(base_url)])
    old = _spawn(runtime_db, base_url, tmp_path / "effects.txt", session, "--start", *flags)
    new = None
    try:
        deadline = time.time() + 60
        while [c.tool_call_id for c in submitter.list_pending_tool_calls(session)] != ["loc1"]:
            assert time.time() < deadline and old.poll() is None, "the pending call never appeared"
            time.sleep(0.02)
        time.sleep(0.3)  # let the run settle into DBOS.recv
        submitter.submit_tool_result(session, {"kind": "client-tool-result", "tool_call_id": "loc1", "result": "Oslo"})
        assert held.wait(60), "the model call after the answer never came"
        old.send_signal(signal.SIGKILL)
        old.wait(10)
        workflow_id = submitter.list_runs(session)[0].workflow_id
        recorded = [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]
        assert recorded[-3:] == tail
        assert recorded.count("hitl-crash-agent.hitl.check") == checks  # old: the first check a step too
        new = _spawn(runtime_db, base_url, tmp_path / "effects.txt", session)
        out, _ = new.communicate(timeout=90)
        assert new.returncode == 0 and "finished completed" in out, out
    finally:
        for proc in (old, new):
            if proc is not None and proc.poll() is None:
                proc.kill()
        server.stop()
    state = submitter.store.load_state(session)
    assert state is not None and state.output == {"answer": '"Oslo"'}
    assert find_unpaired_tool_call_ids(state.messages) == []
    assert [(r.turn, r.status) for r in submitter.store.list_runs(session)] == [(1, "completed")]
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]
    assert steps[: len(recorded)] == recorded  # replayed, not rewritten
