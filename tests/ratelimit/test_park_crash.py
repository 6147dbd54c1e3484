"""A run parked for admission survives its process being killed: the next process finishes it, once.

Two real processes, on the embedded SQLite default and on PostgreSQL, the real LiteLLM client against the scripted
OpenAI-compatible server (``park_worker.py``). The first starts a run that holds a
``concurrency=1`` slot with a slow call and a second run that parks; it is SIGKILLed while the
second is parked. The second process recovers both: the first run's call is made again (it was
in flight when the process died), the second run, recovered while still waiting, leaves its thread
again until it is admitted, and then ends ``completed`` with one park and one model
call recorded, its prompt sent to the provider once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helix_dbos.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("park_worker.py")


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer([{"text": "slow", "delay_seconds": 3.0}], handler=lambda _: {"text": "ok"}) as s:
        yield s


def _worker(mode: str, url: str, server: ScriptedOpenAIServer) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode, url, server.base_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _prompts(server: ScriptedOpenAIServer, text: str) -> int:
    return sum(text in json.dumps(body.get("messages")) for body in server.requests)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_database_url"))
    return f"sqlite:///{tmp_path}/helix.sqlite"


@pytest.mark.timeout(240)
def test_a_parked_run_whose_process_is_killed_is_finished_by_the_next_one_with_one_model_call(
    database_url: str, server: ScriptedOpenAIServer
) -> None:
    url = database_url
    first = _worker("start", url, server)
    try:
        assert first.stdout is not None
        lines = []
        for line in first.stdout:
            lines.append(line)
            if line.strip() in ("parked", "timed out"):
                break
        assert lines and lines[-1].strip() == "parked", "".join(lines)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert _prompts(server, '"two"') == 0  # parked: never sent

    second = _worker("recover", url, server)
    output, _ = second.communicate(timeout=180)
    assert second.returncode == 0, output
    assert "park-one completed" in output, output
    assert "park-two completed 1 1" in output, output  # one park, one model call recorded
    assert _prompts(server, '"two"') == 1, output  # and sent to the provider once
