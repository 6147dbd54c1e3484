"""The seeds' portable pattern over HTTP: answer a pending call, then ``POST .../resume``; the
resume is the run the answer continued (seed 001, "Driving the agent loop after submitToolResult")."""

from __future__ import annotations

import httpx
import pytest

from tests.service.conftest import Service
from tests.service.test_routes import has_pending, wait_until

pytestmark = pytest.mark.postgres


async def test_resume_after_an_answer_is_the_answered_run(service: Service, client: httpx.AsyncClient) -> None:
    started = (await client.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()
    session_id = started["session_id"]
    snapshot = await wait_until(client, session_id, has_pending)
    [call] = snapshot["pending_tool_calls"]
    base = f"/v1/sessions/{session_id}"
    answer = {"kind": "client-tool-result", "tool_call_id": call["tool_call_id"], "result": {"city": "Lyon"}}
    assert (await client.post(f"{base}/tool-results", json=answer)).status_code == 202
    resumed = await client.post(f"{base}/resume", json={})
    assert resumed.status_code == 202, resumed.text
    assert resumed.json()["run_id"] == started["run_id"]
    result = (await client.get(f"{base}/result", params={"timeout_seconds": 10})).json()
    assert result["status"] == "completed" and result["output"] == "You are in Lyon."
    assert [r["run_id"] for r in (await client.get(f"{base}/runs")).json()] == [started["run_id"]]
