"""Smaller HTTP contract breaks (issue 9, item 8), each reproduced first.

- ``idempotency_key`` without ``session_id``: the same key is the same session and run (per
  authenticated principal), also when the requests race.
- A client tool result with both ``result`` and ``error`` is ambiguous: 422, the call stays open.
- After an abort, ``/result`` says the run was aborted, and why.
- An answer for a tool call the run has not registered waits off the blocking pool, so a flood of
  bogus answers cannot stall other requests.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from helix_dbos.service import create_app
from tests.service.conftest import AUTH, TOKEN, Service
from tests.service.test_routes import assert_error, has_pending, wait_until

pytestmark = pytest.mark.postgres


async def test_idempotency_key_without_session_id_is_one_session(service: Service, client: httpx.AsyncClient) -> None:
    body = {"agent": "echo", "input": "once", "idempotency_key": "order-42"}
    first = await client.post("/v1/runs", json=body)
    assert first.status_code == 202, first.text
    second = await client.post("/v1/runs", json=body)
    assert second.status_code == 202, second.text
    assert (second.json()["session_id"], second.json()["run_id"]) == (
        first.json()["session_id"],
        first.json()["run_id"],
    )
    session_id = first.json()["session_id"]
    result = (await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 10})).json()
    assert result["output"] == "echo: once"
    # A repeat after the run finished still answers with the same run, and starts nothing.
    third = (await client.post("/v1/runs", json=body)).json()
    assert third["run_id"] == first.json()["run_id"] and third["status"] == "completed"
    assert len((await client.get(f"/v1/sessions/{session_id}/runs")).json()) == 1
    # Another key is another session.
    other = (await client.post("/v1/runs", json={**body, "idempotency_key": "order-43"})).json()
    assert other["session_id"] != session_id


async def test_idempotency_key_races_meet_on_one_run(service: Service, client: httpx.AsyncClient) -> None:
    body = {"agent": "echo", "input": "race", "idempotency_key": "race-key"}
    responses = await asyncio.gather(*(client.post("/v1/runs", json=body) for _ in range(8)))
    assert {r.status_code for r in responses} == {202}, [r.text for r in responses]
    assert len({(r.json()["session_id"], r.json()["run_id"]) for r in responses}) == 1


async def test_idempotency_keys_are_scoped_to_the_principal(service: Service) -> None:
    app = create_app(service.executor, bearer_tokens=[TOKEN, "other-token-9876543210"])
    body = {"agent": "echo", "input": "mine", "idempotency_key": "shared-key"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://s") as http:
        alice = (await http.post("/v1/runs", json=body, headers=AUTH)).json()
        bob = (
            await http.post("/v1/runs", json=body, headers={"Authorization": "Bearer other-token-9876543210"})
        ).json()
        again = (await http.post("/v1/runs", json=body, headers=AUTH)).json()
    assert alice["session_id"] != bob["session_id"]
    assert again["session_id"] == alice["session_id"]
    # The token list may be reordered without moving anyone's keys.
    reordered = create_app(service.executor, bearer_tokens=["other-token-9876543210", TOKEN])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=reordered), base_url="http://s") as http:
        assert (await http.post("/v1/runs", json=body, headers=AUTH)).json()["session_id"] == alice["session_id"]


async def test_tool_result_with_both_result_and_error_is_422(service: Service, client: httpx.AsyncClient) -> None:
    session_id = (await client.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
    [call] = (await wait_until(client, session_id, has_pending))["pending_tool_calls"]
    both = {"kind": "client-tool-result", "tool_call_id": call["tool_call_id"], "result": {"city": "X"}, "error": "no"}
    error = assert_error(
        await client.post(f"/v1/sessions/{session_id}/tool-results", json=both), 422, "validation_error"
    )
    assert "result" in error["message"] and "error" in error["message"]
    null_result = {**both, "result": None}
    assert_error(
        await client.post(f"/v1/sessions/{session_id}/tool-results", json=null_result), 422, "validation_error"
    )
    snapshot = (await client.get(f"/v1/sessions/{session_id}")).json()
    assert [c["tool_call_id"] for c in snapshot["pending_tool_calls"]] == [call["tool_call_id"]]
    # An error alone is a tool error the model sees; it is accepted.
    failed = {"kind": "client-tool-result", "tool_call_id": call["tool_call_id"], "error": "GPS off", "result": None}
    failed.pop("result")
    assert (await client.post(f"/v1/sessions/{session_id}/tool-results", json=failed)).status_code == 202
    result = (await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 10})).json()
    assert result["status"] == "completed" and "GPS off" in result["output"]


async def test_result_after_abort_says_aborted_with_the_reason(service: Service, client: httpx.AsyncClient) -> None:
    session_id = (await client.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
    await wait_until(client, session_id, has_pending)
    assert (await client.post(f"/v1/sessions/{session_id}/abort", json={"reason": "user left"})).status_code == 200
    result: dict[str, Any] = (
        await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 10})
    ).json()
    assert result["status"] == "failed"
    assert result["aborted"] is True and result["abort_reason"] == "user left"
    assert result["error"] == "aborted: user left"
    assert "CANCELLED" not in str(result)


async def test_unregistered_tool_call_answers_do_not_hold_blocking_threads(service: Service) -> None:
    app = create_app(service.executor, bearer_tokens=[TOKEN], blocking_threads=4)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://s", headers=AUTH, timeout=30) as http:
        session_id = (await http.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
        await wait_until(http, session_id, has_pending)
        bogus = [
            http.post(
                f"/v1/sessions/{session_id}/tool-results",
                json={"kind": "client-tool-result", "tool_call_id": f"bogus-{i}", "result": 1},
            )
            for i in range(16)
        ]
        pending = [asyncio.ensure_future(request) for request in bogus]
        await asyncio.sleep(0.3)
        started = time.monotonic()
        snapshot = await http.get(f"/v1/sessions/{session_id}")
        elapsed = time.monotonic() - started
        assert snapshot.status_code == 200
        assert elapsed < 1.0, f"GET waited {elapsed:.2f} s behind bogus tool results"
        for response in await asyncio.gather(*pending):
            assert_error(response, 404, "state_tool_call_not_found")
        await http.post(f"/v1/sessions/{session_id}/abort")


async def test_answers_that_do_not_fit_the_pending_call_are_409_and_change_nothing(
    service: Service, client: httpx.AsyncClient
) -> None:
    session_id = (await client.post("/v1/runs", json={"agent": "janitor", "input": "clean"})).json()["session_id"]
    [call] = (await wait_until(client, session_id, has_pending))["pending_tool_calls"]
    assert call["kind"] == "approval"
    url = f"/v1/sessions/{session_id}/tool-results"
    wrong_kind = {"kind": "client-tool-result", "tool_call_id": call["tool_call_id"], "result": 1}
    assert_error(await client.post(url, json=wrong_kind), 409, "state_conflict")
    other_arguments = {
        "kind": "approval-response",
        "tool_call_id": call["tool_call_id"],
        "approved": True,
        "arguments_digest": "0" * len(call["arguments_digest"]),
    }
    error = assert_error(await client.post(url, json=other_arguments), 409, "state_conflict")
    assert "arguments_digest" in error["message"]
    snapshot = (await client.get(f"/v1/sessions/{session_id}")).json()
    assert [c["tool_call_id"] for c in snapshot["pending_tool_calls"]] == [call["tool_call_id"]]
    approve = {**other_arguments, "arguments_digest": call["arguments_digest"]}
    assert (await client.post(url, json=approve)).status_code == 202
    result = (await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 10})).json()
    assert result["status"] == "completed" and "/tmp/x" in result["output"]


def test_principal_scopes_are_stable_and_secret_free() -> None:
    from dataclasses import dataclass

    from helix_dbos.service.auth import AnonymousPrincipal, BearerPrincipal, principal_scope

    @dataclass(frozen=True)
    class User:
        id: int

    class Opaque:
        pass

    assert principal_scope(BearerPrincipal(token_index=3, subject="ab12")) == "bearer:ab12"
    assert principal_scope(AnonymousPrincipal()) == principal_scope(None) == "anonymous"
    assert principal_scope("alice") == "principal:alice" == principal_scope({"sub": "alice"})
    assert principal_scope(User(id=7)) == "principal:7"
    assert principal_scope(Opaque()) == principal_scope(Opaque()) == "shared"
