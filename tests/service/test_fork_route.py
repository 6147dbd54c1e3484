"""``POST /v1/sessions/{id}/fork``: a fork over HTTP, its repeat, and every refusal as a 4xx with a code."""

from __future__ import annotations

from typing import Any

import httpx

from tests.service.conftest import Service
from tests.service.test_bad_input import assert_invalid_text, completed_echo
from tests.service.test_routes import assert_error, has_pending, wait_until


async def test_fork_then_continue_the_fork_leaving_the_original_alone(client: httpx.AsyncClient) -> None:
    original = await completed_echo(client, "http-fork-src")
    messages_before = (await client.get("/v1/sessions/http-fork-src/messages")).json()
    response = await client.post("/v1/sessions/http-fork-src/fork", json={"new_session_id": "http-fork-1"})
    assert response.status_code == 200, response.text
    fork: dict[str, Any] = response.json()
    assert fork["session_id"] == "http-fork-1" and fork["created"] is True
    assert (fork["source_session_id"], fork["status"]) == ("http-fork-src", "completed")
    assert fork["message_count"] == original["message_count"]
    assert fork["checkpoint_id"].startswith("cpv1-http-fork-src-")
    assert fork["fork_checkpoint_id"].startswith("cpv1-http-fork-1-")

    repeat = (await client.post("/v1/sessions/http-fork-src/fork", json={"new_session_id": "http-fork-1"})).json()
    assert repeat == {**fork, "created": False}

    started = await client.post("/v1/runs", json={"agent": "echo", "input": "again", "session_id": "http-fork-1"})
    assert started.status_code == 202, started.text
    result = (await client.get("/v1/sessions/http-fork-1/result", params={"timeout_seconds": 10})).json()
    assert result["status"] == "completed"
    assert (await client.get("/v1/sessions/http-fork-src/messages")).json() == messages_before
    snapshot = (await client.get("/v1/sessions/http-fork-src")).json()
    assert (snapshot["turn"], snapshot["message_count"]) == (original["turn"], original["message_count"])


async def test_fork_refusals_are_4xx_with_their_codes(service: Service, client: httpx.AsyncClient) -> None:
    await completed_echo(client, "http-fork-bad")
    assert_error(await client.post("/v1/sessions/http-fork-none/fork"), 404, "state_session_not_found")
    assert_error(
        await client.post("/v1/sessions/http-fork-bad/fork", json={"checkpoint_id": "cpv1-other-s1-t1-abc"}),
        404,
        "state_checkpoint_not_found",
    )
    assert_error(
        await client.post("/v1/sessions/http-fork-bad/fork", json={"new_session_id": "http-fork-bad"}),
        409,
        "state_conflict",
    )
    for body in ({"new_session_id": "has/slash"}, {"checkpoint_id": ""}, {"unknown": 1}):
        assert_error(await client.post("/v1/sessions/http-fork-bad/fork", json=body), 422, "validation_error")
    assert_invalid_text(
        await client.post("/v1/sessions/http-fork-bad/fork", json={"checkpoint_id": "cp\u0000"}),
        ["body", "checkpoint_id"],
    )
    # A run in flight (waiting for a client tool): "the latest" is refused, a named checkpoint is not.
    session_id = (await client.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
    await wait_until(client, session_id, has_pending)
    assert_error(await client.post(f"/v1/sessions/{session_id}/fork"), 409, "state_already_running")
    checkpoint = service.executor.store.get_latest_checkpoint(session_id)
    assert checkpoint is not None
    named = await client.post(f"/v1/sessions/{session_id}/fork", json={"checkpoint_id": checkpoint.id})
    assert named.status_code == 200, named.text
    await client.post(f"/v1/sessions/{session_id}/abort")
    assert service.executor.store.load_session("http-fork-none") is None


async def test_the_fork_route_is_documented(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    operation = schema["paths"]["/v1/sessions/{session_id}/fork"]["post"]
    assert set(operation["responses"]) >= {"200", "401", "404", "409", "413", "422", "500", "503"}
    codes_404 = schema["components"]["schemas"]
    assert "ForkView" in codes_404 and "ForkRequest" in codes_404


async def test_state_history_then_a_fork_with_an_edited_input_and_state(client: httpx.AsyncClient) -> None:
    await completed_echo(client, "http-tt-src")
    messages_before = (await client.get("/v1/sessions/http-tt-src/messages")).json()
    history = (await client.get("/v1/sessions/http-tt-src/checkpoints")).json()
    assert history["total"] == len(history["items"]) >= 2
    latest = history["items"][0]  # newest first
    assert latest["session_id"] == "http-tt-src" and latest["run_id"] and latest["status"] == "completed"
    assert latest["message_count"] == 2 and latest["state_summary"] == "{}" and latest["timestamp"] > 0
    assert_error(await client.get("/v1/sessions/http-tt-none/checkpoints"), 404, "state_session_not_found")
    # An offset past what the database can hold is refused at the edge (it was a 500: bigint out of range).
    huge = "697902570947760277935882240"
    assert_error(await client.get(f"/v1/sessions/http-tt-src/checkpoints?offset={huge}"), 422, "validation_error")

    body = {
        "checkpoint_id": latest["id"],
        "new_session_id": "http-tt-fork",
        "message": "hello again",
        "state_patch": {"mood": "edited"},
    }
    response = await client.post("/v1/sessions/http-tt-src/fork", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["message_count"] == 1  # the replaced input; the reply after it is dropped
    retried = await client.post("/v1/sessions/http-tt-fork/retry", json={})
    assert retried.status_code == 202, retried.text
    result = (await client.get("/v1/sessions/http-tt-fork/result", params={"timeout_seconds": 10})).json()
    assert result["status"] == "completed" and "hello again" in str(result["output"])
    state = (await client.get("/v1/sessions/http-tt-fork/state")).json()
    assert state["state"] == {"mood": "edited"}
    assert (await client.get("/v1/sessions/http-tt-src/messages")).json() == messages_before

    conflicting = {"checkpoint_id": latest["id"], "state": {}, "state_patch": {}}
    assert_error(await client.post("/v1/sessions/http-tt-src/fork", json=conflicting), 422, "validation_error")
    other_edit = {**body, "message": "something else"}
    assert_error(await client.post("/v1/sessions/http-tt-src/fork", json=other_edit), 409, "state_conflict")
    bad_mode = {"message": "x", "message_mode": "insert"}
    assert_error(await client.post("/v1/sessions/http-tt-src/fork", json=bad_mode), 422, "validation_error")
