"""A guard's verdict is recorded: a worker SIGKILLed after the guard step does not run the guard again.

Real processes on PostgreSQL, the real LiteLLM adapter against the scripted server in this test
process. The model holds its second request (the one after the guard step) open until the test
kills the worker; the recovering worker replays the tool and guard steps and asks the model again.
"""

from __future__ import annotations

import collections
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.worker_process import start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("guard_worker.py")


class Model:
    """Calls the tool once, then holds the first answer after its result (the crash point)."""

    def __init__(self) -> None:
        self.held = threading.Event()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return {"tool_calls": [{"id": "c1", "name": "append_line", "arguments": {"text": "one"}}]}
        if not self.held.is_set():
            self.held.set()
            return {"text": "slow", "delay_seconds": 30}
        return {"text": "Done."}


def test_a_sigkill_after_the_guard_step_does_not_run_the_guard_again(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    url = new_migrated_database("guardcrash")
    effects = tmp_path / "effects.txt"
    session = f"guard-crash-{unique_name('s')}"
    model = Model()
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    first = start_worker(WORKER, [url, base_url, str(effects), session, "--start"])
    try:
        deadline = time.time() + 60
        while not model.held.is_set():
            assert time.time() < deadline and first.poll() is None, "the worker never reached the crash point"
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL
        second = start_worker(WORKER, [url, base_url, str(effects), session])
        out, _ = second.communicate(timeout=90)
        assert second.returncode == 0 and "finished completed" in out, out
    finally:
        if first.poll() is None:
            first.kill()
        server.stop()
    counts = collections.Counter(effects.read_text().splitlines())
    assert counts == {"tool:one": 1, "guard:c1": 1}  # the recorded verdict replayed: no second check
    assert server.request_count == 3  # the held model call is the one step that ran again
