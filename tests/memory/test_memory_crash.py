"""A memory is injected once even when the worker is SIGKILLed after the memory step.

The worker (``memory_worker.py``) calls the scripted server through the real LiteLLM adapter; the
server holds the first model call open, and the test kills the worker then. Before restarting it,
the test saves one more memory that matches the question: the recovered run must inject what the
recorded ``{agent}.memory`` step found, not search again (the new memory would join it), and the
injection message must land in the transcript once.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.memory import MemoryManager, PostgresMemoryStore
from helix_dbos.memory.injection import MEMORY_INJECTION_HEADER, is_memory_injection
from helix_dbos.messages import AssistantMessage
from helix_dbos.testing import ScriptedOpenAIServer
from tests.memory.agents import NAMESPACE
from tests.pg import unique_name
from tests.worker_process import WorkerProcess, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("memory_worker.py")
REPO = Path(__file__).resolve().parents[2]


class Model:
    """Holds the first request open (so the test can kill the worker in it), then answers."""

    def __init__(self) -> None:
        self.held = threading.Event()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if not self.held.is_set():
            self.held.set()
            return {"text": "slow", "delay_seconds": 30}
        return {"text": "Teal."}


def _spawn(url: str, base_url: str, session_id: str, *, start: bool) -> WorkerProcess:
    return start_worker(WORKER, [url, base_url, session_id, *(["--start"] if start else [])])


def test_memory_injected_once_after_a_sigkill(new_migrated_database: Callable[[str], str]) -> None:
    url = new_migrated_database("memcrash")
    session_id = f"memcrash-{unique_name('s')}"
    memories = PostgresMemoryStore(url)
    manager = MemoryManager(memories)
    colour = manager.save("Ada's favourite colour is teal.", namespace=NAMESPACE)
    model = Model()
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    first = _spawn(url, base_url, session_id, start=True)
    try:
        deadline = time.time() + 60
        while not model.held.is_set():
            assert first.poll() is None, first.stdout.read() if first.stdout else ""
            assert time.time() < deadline, "the worker never called the model"
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL
        # Matches the question too: a re-run search would inject it; the recorded step does not.
        late = manager.save("Ada once said her favourite colour was red.", namespace=NAMESPACE)
        second = _spawn(url, base_url, session_id, start=False)
        out, _ = second.communicate(timeout=90)
        assert second.returncode == 0, out
        assert "finished completed" in out, out
    finally:
        if first.poll() is None:
            first.kill()
        server.stop()
        memories.close()

    expected = f"{MEMORY_INJECTION_HEADER}\n- {colour.content}"
    before, after = server.requests[0], server.requests[-1]
    for body in (before, after):  # the held call and the recovered one saw the same single injection
        injected = [m["content"] for m in body["messages"] if MEMORY_INJECTION_HEADER in str(m.get("content"))]
        assert injected == [expected]
    store = SqlSessionStore(url)
    try:
        state = store.load_state(session_id)
        assert state is not None and state.status == "completed"
        injections = [m for m in state.messages if is_memory_injection(m)]
        assert len(injections) == 1
        assert injections[0].metadata is not None and injections[0].metadata["memory_ids"] == [colour.id]
        assert late.id not in str(state.messages)
        assert sum(isinstance(m, AssistantMessage) for m in state.messages) == 1
    finally:
        store.close()
