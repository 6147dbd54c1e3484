"""``helix-dbos serve`` prints the lifecycle logs of the runs it executes: a real server process on
the embedded SQLite default, the demo agent started over HTTP, logs as JSON lines on stderr."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import httpx

from tests.cli_process import CliProcess, cli_env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_prints_a_runs_lifecycle_as_json(tmp_path: Path) -> None:
    port = _free_port()
    server = CliProcess(
        tmp_path,
        "serve",
        "--agents",
        "demo",
        "--allow-unauthenticated",
        "--port",
        str(port),
        env=cli_env(HELIX_LOG_FORMAT="json", HELIX_EXECUTOR_ID="serve-logs"),
    )
    try:
        server.wait_for(r"Uvicorn running|Application startup complete", timeout=90)
        started = httpx.post(
            f"http://127.0.0.1:{port}/v1/runs", json={"agent": "trip-planner", "input": "Paris and Lima?"}, timeout=30
        )
        assert started.status_code in (200, 201, 202), started.text
        session_id = started.json()["session_id"]
        server.wait_for(r'"event": "run_completed"', timeout=60)
        time.sleep(0.2)
    finally:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
    records = []
    for line in server.output.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("session_id") == session_id:
                records.append(record)
    events = [r["event"] for r in records]
    assert events[0] == "run_started" and events[-1] == "run_completed", server.output
    assert events.count("step_committed") >= 2
    assert {r["logger"] for r in records} == {"helix_dbos.lifecycle"}
    assert all(r["run_id"] == f"{session_id}-turn-1" for r in records)
    assert records[0]["executor_id"] == "serve-logs" and records[0]["agent"] == "trip-planner"
