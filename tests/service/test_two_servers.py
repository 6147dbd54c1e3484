"""Two ``helix-dbos serve`` processes on one PostgreSQL database: the service is stateless.

A run started through one server is answered, interrupted and read through the other. Process A
keeps waiting runs hot (woken across processes by ``DBOS.send``); process B parks them after half a
second (the answer then starts the continuation in whichever process receives it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helix_dbos.store.migrate import upgrade
from tests.serve_process import ServeProcess
from tests.service.conftest import TOKEN

pytestmark = pytest.mark.postgres


def _server(url: str, name: str, hot_window_seconds: float, logs: Path) -> ServeProcess:
    return ServeProcess(
        name,
        url,
        agents="tests.service.agents:agents",
        llm_adapter="tests.service.agents:model",
        token=TOKEN,
        logs=logs,
        extra_args=["--hot-window-seconds", str(hot_window_seconds)],
        http_timeout=15,
    )


def sse_events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event, data)`` pairs of a ``text/event-stream`` response (pings skipped)."""
    event, data = "message", ""
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if line == "":
            if data:
                yield event, json.loads(data)
            event, data = "message", ""
        elif line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data += line.removeprefix("data:").strip()


def poll(
    read: Callable[[], dict[str, Any]], until: Callable[[dict[str, Any]], bool], timeout: float = 15
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached: {value}")
        time.sleep(0.05)


@pytest.fixture
def servers(pg_database_url: str, tmp_path: Path) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    upgrade(pg_database_url)
    started: list[ServeProcess] = []
    try:
        # One after the other: the first launch creates DBOS's schema, which must not race.
        for name, hot in (("server-a", 60.0), ("server-b", 0.5)):
            server = _server(pg_database_url, name, hot, tmp_path)
            started.append(server)
            server.start()
        yield started[0], started[1]
    finally:
        codes = [server.stop() for server in started]
    assert codes == [0] * len(started), [s.log_text() for s in started]


def test_runs_are_driven_from_either_server(servers: tuple[ServeProcess, ServeProcess]) -> None:
    a, b = servers

    def snapshot(server: ServeProcess, session_id: str) -> Callable[[], dict[str, Any]]:
        return lambda: server.http.get(f"/v1/sessions/{session_id}").json()

    def answer(server: ServeProcess, session_id: str, call: dict[str, Any], city: str) -> dict[str, Any]:
        submission = {"kind": "client-tool-result", "tool_call_id": call["tool_call_id"], "result": {"city": city}}
        response = server.http.post(f"/v1/sessions/{session_id}/tool-results", json=submission)
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        return body

    # 1. Started on A, which keeps the run hot; streamed and answered through B: the stream (durable
    #    SQL streams, launch()'s default) and the wake-up (DBOS.send) cross processes.
    first = a.http.post("/v1/chat", json={"agent": "locator", "message": "where am I?"}).json()
    sid = first["session_id"]
    events: list[tuple[str, dict[str, Any]]] = []
    with b.http.stream("GET", first["stream_url"]) as response:
        assert response.status_code == 200
        for event, data in sse_events(response):
            events.append((event, data))
            if event == "status" and data["status"] == "paused":
                waiting = b.http.get(f"/v1/sessions/{sid}").json()
                assert answer(b, sid, waiting["pending_tool_calls"][0], "Lyon")["run_id"] == first["run_id"]
            if event in ("end", "fail", "truncated"):
                break
    assert events[-1] == ("end", {"type": "end"})
    assert [d["output"] for e, d in events if e == "chunk" and d["type"] == "output"] == ["You are in Lyon."]
    result = b.http.get(f"/v1/sessions/{sid}/result", params={"timeout_seconds": 15}).json()
    assert (result["status"], result["output"], result["run_id"]) == ("completed", "You are in Lyon.", first["run_id"])

    # 2. Started on B, which parks the run; answered on A, which starts the continuation run.
    second = b.http.post("/v1/runs", json={"agent": "locator", "input": "where am I?"}).json()
    sid = second["session_id"]
    parked = poll(snapshot(a, sid), lambda s: s["current_run"]["status"] == "suspended")
    continued = answer(a, sid, parked["pending_tool_calls"][0], "Oslo")
    assert continued["run_id"] == f"{sid}-turn-2"
    result = b.http.get(f"/v1/sessions/{sid}/result", params={"timeout_seconds": 15}).json()
    assert (result["status"], result["output"]) == ("completed", "You are in Oslo.")
    runs = a.http.get(f"/v1/sessions/{sid}/runs").json()
    assert [(r["turn"], r["status"]) for r in runs] == [(1, "suspended"), (2, "completed")]

    # 3. A hot run on A, interrupted through B: the durable flag and the wake-up reach it.
    third = a.http.post("/v1/chat", json={"agent": "locator", "message": "go"}).json()
    sid = third["session_id"]
    poll(snapshot(b, sid), lambda s: bool(s["pending_tool_calls"]))
    assert b.http.post(f"/v1/chat/{sid}/interrupt", json={"reason": "user"}).json()["requested"] is True
    result = a.http.get(f"/v1/sessions/{sid}/result", params={"timeout_seconds": 15}).json()
    assert result["status"] == "interrupted"
