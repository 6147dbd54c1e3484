"""A recovered run does not ask the model again for a structured answer it recorded.

A real worker process (``output_mode_worker.py``) runs a native-mode agent on PostgreSQL through
the real LiteLLM adapter. The model answers with its JSON; the worker is SIGKILLed in the
``on_message`` hook of that answer, after the LLM step was checkpointed and before the run
committed anything (the session is still active). The restarted worker recovers the run: the LLM
step returns its recorded ``structured_output`` and the run completes with that output, with no
second request to the model.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.worker_process import start_worker, wait_for_crash_point

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("output_mode_worker.py")


def test_a_recorded_structured_answer_is_not_asked_for_again_after_a_crash(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    url = new_migrated_database("output_mode_crash")
    marker = tmp_path / "marker.txt"
    session = f"om-{unique_name('s')}"
    with ScriptedOpenAIServer([{"text": '{"city": "Paris", "score": 9}'}]) as server:
        args = [url, server.base_url, str(marker), session]
        first = start_worker(WORKER, [*args, "--start", "--hold"])
        try:
            # The line itself, not the file: open() creates the file before the line is written, and a
            # kill in between would leave the first answer's line unwritten.
            wait_for_crash_point(lambda: marker.exists() and marker.read_text() == "answer\n", 60, first)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            assert first.returncode == -signal.SIGKILL
            before = SqlSessionStore(url)
            try:
                crashed = before.load_session(session)
                assert crashed is not None and crashed.status == "active"  # only recovery can finish it
            finally:
                before.close()

            second = start_worker(WORKER, args)
            out, _ = second.communicate(timeout=90)
            assert second.returncode == 0, out
            assert "finished completed" in out, out
        finally:
            if first.poll() is None:
                first.kill()
        requests = server.requests

    assert len(requests) == 1, "the recovered run asked the model again"
    assert requests[0]["response_format"]["json_schema"]["name"] == "Verdict"
    assert marker.read_text().splitlines() == ["answer", "answer"]  # the hooks step ran again, the model did not
    store = SqlSessionStore(url)
    try:
        state = store.load_state(session)
        assert state is not None and state.status == "completed"
        assert state.output == {"city": "Paris", "score": 9}
    finally:
        store.close()
