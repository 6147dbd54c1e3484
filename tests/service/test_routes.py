"""The HTTP routes in-process (httpx ASGI transport) on PostgreSQL: auth, validation, run control."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from helix_dbos.service import create_app
from tests.service.conftest import AUTH, TOKEN, Service

pytestmark = pytest.mark.postgres


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["retryable"], bool)
    return error


async def wait_until(client: httpx.AsyncClient, session_id: str, predicate: Any, timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        snapshot: dict[str, Any] = (await client.get(f"/v1/sessions/{session_id}")).json()
        if predicate(snapshot):
            return snapshot
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached: {snapshot}")
        await asyncio.sleep(0.02)


def has_pending(snapshot: dict[str, Any]) -> bool:
    return bool(snapshot.get("pending_tool_calls"))


# -- authentication ---------------------------------------------------------------------------------------


def anonymous(service: Service) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=service.app), base_url="http://service")


async def test_requests_without_valid_credentials_are_rejected_and_change_nothing(service: Service) -> None:
    body = {"agent": "echo", "input": "hi", "session_id": "unauth-1"}
    async with anonymous(service) as http:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": "Bearer "},
        ):
            response = await http.post("/v1/runs", json=body, headers=headers)
            error = assert_error(response, 401, "unauthenticated")
            assert error["retryable"] is False
            assert response.headers["www-authenticate"].startswith("Bearer")
        # Auth runs before the body is parsed: malformed JSON without credentials is a 401, not a 422.
        response = await http.post("/v1/runs", content=b"{nope", headers={"Content-Type": "application/json"})
        assert_error(response, 401, "unauthenticated")
        for method, path in [
            ("GET", "/v1/sessions/unauth-1"),
            ("GET", "/v1/sessions/unauth-1/stream"),
            ("POST", "/v1/sessions/unauth-1/abort"),
            ("POST", "/v1/sessions/unauth-1/tool-results"),
            ("POST", "/v1/chat"),
        ]:
            assert_error(
                await http.request(method, path, headers={"Authorization": "Bearer nope"}), 401, "unauthenticated"
            )
        # The token's scheme is case-insensitive; the token itself is not.
        assert (
            await http.get("/v1/sessions/unauth-1", headers={"Authorization": f"bearer {TOKEN}"})
        ).status_code == 404
        response = await http.get("/v1/sessions/unauth-1", headers={"Authorization": f"Bearer {TOKEN.upper()}"})
        assert_error(response, 401, "unauthenticated")
    assert service.executor.store.load_session("unauth-1") is None
    assert service.executor.store.list_sessions(limit=5) == []


async def test_public_routes_need_no_credentials(service: Service) -> None:
    async with anonymous(service) as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        schema = (await http.get("/openapi.json")).json()
        assert (await http.get("/docs")).status_code == 200
    paths = schema["paths"]
    for path in [
        "/v1/runs",
        "/v1/sessions/{session_id}",
        "/v1/sessions/{session_id}/stream",
        "/v1/sessions/{session_id}/tool-results",
        "/v1/chat",
        "/v1/chat/{session_id}/stream",
    ]:
        assert path in paths
    assert "POST /start" in paths["/v1/runs"]["post"]["description"]
    assert "/submit-tool-result" in paths["/v1/sessions/{session_id}/tool-results"]["post"]["description"]
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


async def test_authenticate_hook(service: Service) -> None:
    seen: list[Any] = []

    async def authenticate(request: Request) -> str | None:
        return "alice" if request.headers.get("x-user") == "alice" else None

    app = create_app(service.executor, authenticate=authenticate)

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        seen.append(getattr(request.state, "principal", None))
        return response

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as http:
        assert_error(await http.get("/v1/sessions/x"), 401, "unauthenticated")
        assert_error(await http.get("/v1/sessions/x", headers={"x-user": "alice"}), 404, "state_session_not_found")
    assert seen == [None, "alice"]


# -- validation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/v1/runs", b"{not json"),
        ("/v1/runs", b"[1, 2]"),
        ("/v1/runs", b'{"agent": "echo"}'),
        ("/v1/runs", b'{"agent": "echo", "input": 42}'),
        ("/v1/runs", b'{"agent": "echo", "input": "hi", "sesion_id": "typo"}'),
        ("/v1/runs", b'{"agent": "echo", "input": {"message": "hi", "extra": 1}}'),
        ("/v1/runs", b'{"agent": "echo", "input": "hi", "session_id": "has/slash"}'),
        ("/v1/runs", b'{"agent": "", "input": "hi"}'),
        ("/v1/chat", b'{"agent": "echo", "message": {"role": "user"}}'),
        ("/v1/sessions/s/tool-results", b'{"kind": "telepathy", "tool_call_id": "c1"}'),
        ("/v1/sessions/s/tool-results", b'{"tool_call_id": "c1", "result": 1}'),
        ("/v1/sessions/s/tool-results", b'{"kind": "approval-response", "tool_call_id": "c1"}'),
        ("/v1/sessions/s/tool-results", b'{"kind": "client-tool-result", "tool_call_id": "c1", "x": 1}'),
        ("/v1/sessions/s/interrupt", b'{"reason": 5}'),
        ("/v1/sessions/s/resume", b'{"agent": "echo", "unknown": true}'),
        ("/v1/sessions/s/retry", b'"just a string"'),
    ],
)
async def test_malformed_bodies_are_422_validation_errors(client: httpx.AsyncClient, path: str, content: bytes) -> None:
    response = await client.post(path, content=content, headers={"Content-Type": "application/json"})
    error = assert_error(response, 422, "validation_error")
    assert error["details"] and all("loc" in d and "msg" in d for d in error["details"])


async def test_bad_query_and_header_values_are_422(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v1/sessions/s/messages?limit=0"), 422, "validation_error")
    assert_error(await client.get("/v1/sessions/s/messages?offset=x"), 422, "validation_error")
    assert_error(await client.get("/v1/sessions/s/result?timeout_seconds=-1"), 422, "validation_error")
    assert_error(await client.get("/v1/sessions/s/stream?after=-3"), 422, "validation_error")


async def test_unknown_routes_and_methods_are_json_errors(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v1/nothing-here"), 404, "framework_route_not_found")
    response = await client.delete("/v1/runs")
    assert_error(response, 405, "framework_method_not_allowed")
    assert response.headers["allow"] == "POST"


async def test_unknown_session_and_agent_are_404(client: httpx.AsyncClient) -> None:
    missing = "no-such-session"
    for method, path in [
        ("GET", f"/v1/sessions/{missing}"),
        ("GET", f"/v1/sessions/{missing}/messages"),
        ("GET", f"/v1/sessions/{missing}/runs"),
        ("GET", f"/v1/sessions/{missing}/result"),
        ("GET", f"/v1/sessions/{missing}/stream"),
        ("GET", f"/v1/chat/{missing}/stream"),
        ("POST", f"/v1/sessions/{missing}/resume"),
        ("POST", f"/v1/sessions/{missing}/retry"),
        ("POST", f"/v1/sessions/{missing}/interrupt"),
        ("POST", f"/v1/sessions/{missing}/abort"),
        ("POST", f"/v1/chat/{missing}/abort"),
    ]:
        assert_error(await client.request(method, path), 404, "state_session_not_found")
    submission = {"kind": "client-tool-result", "tool_call_id": "c1", "result": 1}
    assert_error(
        await client.post(f"/v1/sessions/{missing}/tool-results", json=submission), 404, "state_session_not_found"
    )
    error = assert_error(
        await client.post("/v1/runs", json={"agent": "ghost", "input": "hi"}), 404, "state_agent_not_found"
    )
    assert "ghost" in error["message"] and "echo" in error["message"]


# -- runs -----------------------------------------------------------------------------------------------------


async def test_start_status_result_round_trip(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/runs", json={"agent": "echo", "input": {"message": "hello", "state": {}}, "session_id": "echo-1"}
    )
    assert response.status_code == 202, response.text
    started = response.json()
    assert started["session_id"] == "echo-1"
    assert started["run_id"] == "echo-1-turn-1"
    assert started["stream_url"] == "/v1/sessions/echo-1/stream"
    assert started["status"] in ("running", "completed")

    result = (await client.get("/v1/sessions/echo-1/result", params={"timeout_seconds": 10})).json()
    assert result == {
        "session_id": "echo-1",
        "run_id": "echo-1-turn-1",
        "status": "completed",
        "output": "echo: hello",
        "error": None,
        "suspended": None,
        "aborted": False,
        "abort_reason": None,
    }
    snapshot = (await client.get("/v1/sessions/echo-1")).json()
    assert snapshot["status"] == "completed"
    assert snapshot["agent"] == "echo"
    assert snapshot["output"] == "echo: hello"
    assert snapshot["current_run"]["run_id"] == "echo-1-turn-1"
    assert snapshot["current_run"]["status"] == "completed"
    assert snapshot["step_count"] == 1
    assert snapshot["pending_tool_calls"] == []
    assert snapshot["can_resume"]["can_resume"] is False
    assert snapshot["stream"]["status"] == "ended"
    assert snapshot["stream"]["latest_sequence"] > 0

    page = (await client.get("/v1/sessions/echo-1/messages", params={"limit": 1, "offset": 1})).json()
    assert page["total"] == 2 and page["has_more"] is False
    assert page["messages"] == [{"role": "assistant", "content": "echo: hello"} | page["messages"][0]]
    runs = (await client.get("/v1/sessions/echo-1/runs")).json()
    assert [(r["turn"], r["status"], r["mode"]) for r in runs] == [(1, "completed", "execute")]

    # The next turn of a completed session; a duplicate idempotency key returns the same run.
    again = {"agent": "echo", "input": "again", "session_id": "echo-1", "idempotency_key": "k-2"}
    second = (await client.post("/v1/runs", json=again)).json()
    assert second["run_id"] == "echo-1-turn-2"
    assert (await client.post("/v1/runs", json=again)).json()["run_id"] == "echo-1-turn-2"
    result = (await client.get("/v1/sessions/echo-1/result", params={"timeout_seconds": 10})).json()
    assert result["output"] == "echo: again"


async def test_chat_turns(client: httpx.AsyncClient) -> None:
    first = (await client.post("/v1/chat", json={"agent": "echo", "message": "one"})).json()
    session_id = first["session_id"]
    assert first["stream_url"] == f"/v1/chat/{session_id}/stream"
    assert (await client.get(f"/v1/sessions/{session_id}/result?timeout_seconds=10")).json()["output"] == "echo: one"
    message = [{"role": "user", "content": "two", "metadata": {"via": "chat"}}]
    second = (
        await client.post("/v1/chat", json={"agent": "echo", "message": message, "session_id": session_id})
    ).json()
    assert second["run_id"] == f"{session_id}-turn-2"
    assert (await client.get(f"/v1/sessions/{session_id}/result?timeout_seconds=10")).json()["output"] == "echo: two"


async def test_client_tool_round_trip_without_sse(service: Service, client: httpx.AsyncClient) -> None:
    started = (await client.post("/v1/runs", json={"agent": "locator", "input": "where am I?"})).json()
    session_id = started["session_id"]
    snapshot = await wait_until(client, session_id, has_pending)
    [call] = snapshot["pending_tool_calls"]
    assert call["tool_name"] == "get_location" and call["kind"] == "client"
    assert call["arguments"] == {"city": "?"} and call["arguments_digest"]
    assert snapshot["status"] == "active" and snapshot["current_run"]["status"] == "running"

    # Still waiting for the client: the result wait times out with a retryable 408.
    timeout = assert_error(
        await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 0.2}),
        408,
        "transport_result_timeout",
    )
    assert timeout["retryable"] is True

    # Wrong kind (a well-formed answer that does not fit the call), unknown call: rejected, nothing recorded.
    approval = {"kind": "approval-response", "tool_call_id": call["tool_call_id"], "approved": True}
    assert_error(await client.post(f"/v1/sessions/{session_id}/tool-results", json=approval), 409, "state_conflict")
    unknown = {"kind": "client-tool-result", "tool_call_id": "nope", "result": {}}
    assert_error(
        await client.post(f"/v1/sessions/{session_id}/tool-results", json=unknown), 404, "state_tool_call_not_found"
    )

    answer = {"kind": "client-tool-result", "tool_call_id": call["tool_call_id"], "result": {"city": "Lyon"}}
    response = await client.post(f"/v1/chat/{session_id}/tool-results", json=answer)
    assert response.status_code == 202, response.text
    assert response.json() == {
        "session_id": session_id,
        "tool_call_id": call["tool_call_id"],
        "run_id": started["run_id"],
    }
    # Exactly once: a second answer is a conflict.
    assert_error(
        await client.post(f"/v1/sessions/{session_id}/tool-results", json=answer), 409, "state_concurrency_conflict"
    )
    result = (await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 10})).json()
    assert result["status"] == "completed" and result["output"] == "You are in Lyon."


async def test_interrupt_resume_abort_retry(client: httpx.AsyncClient) -> None:
    session_id = (await client.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
    await wait_until(client, session_id, has_pending)
    assert_error(await client.post(f"/v1/sessions/{session_id}/resume"), 409, "state_already_running")
    assert_error(await client.post(f"/v1/sessions/{session_id}/retry"), 409, "state_already_running")

    response = await client.post(f"/v1/sessions/{session_id}/interrupt", json={"reason": "user"})
    assert response.status_code == 202 and response.json() == {"session_id": session_id, "requested": True}
    result = (await client.get(f"/v1/sessions/{session_id}/result?timeout_seconds=10")).json()
    assert result["status"] == "interrupted"
    snapshot = (await client.get(f"/v1/sessions/{session_id}")).json()
    assert snapshot["status"] == "interrupted" and snapshot["can_resume"]["can_resume"] is True

    assert_error(
        await client.post(f"/v1/sessions/{session_id}/resume", json={"agent": "echo"}), 409, "state_agent_mismatch"
    )
    resumed = (await client.post(f"/v1/sessions/{session_id}/resume", json={"message": "go on"})).json()
    assert resumed["run_id"] == f"{session_id}-turn-2" and resumed["stream_url"].endswith("/stream")
    await wait_until(client, session_id, lambda s: has_pending(s) and s["current_run"]["turn"] == 2)

    response = await client.post(f"/v1/chat/{session_id}/abort", json={"reason": "bye"})
    assert response.status_code == 200 and response.json() == {"session_id": session_id, "status": "failed"}
    snapshot = (await client.get(f"/v1/sessions/{session_id}")).json()
    assert snapshot["status"] == "failed" and snapshot["aborted"] is True and snapshot["pending_tool_calls"] == []
    assert snapshot["can_resume"]["can_resume"] is False
    assert_error(await client.post(f"/v1/sessions/{session_id}/abort"), 409, "state_not_resumable")
    assert_error(await client.post(f"/v1/sessions/{session_id}/resume"), 409, "state_not_resumable")
    interrupted = (await client.post(f"/v1/sessions/{session_id}/interrupt")).json()
    assert interrupted == {"session_id": session_id, "requested": False}

    # Retry from an explicit checkpoint that is not the session's: not found, nothing started.
    assert_error(
        await client.post(f"/v1/sessions/{session_id}/retry", json={"checkpoint_id": "cpv1-other-s1-t1-abc"}),
        404,
        "state_checkpoint_not_found",
    )
    retried = (await client.post(f"/v1/sessions/{session_id}/retry", json={})).json()
    assert retried["run_id"] == f"{session_id}-turn-3"
    runs = (await client.get(f"/v1/sessions/{session_id}/runs")).json()
    assert [(r["turn"], r["mode"]) for r in runs] == [(1, "execute"), (2, "resume"), (3, "retry")]
    await client.post(f"/v1/sessions/{session_id}/abort")


async def test_starting_a_run_on_a_busy_session_is_409(client: httpx.AsyncClient) -> None:
    session_id = (await client.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
    await wait_until(client, session_id, has_pending)
    busy = {"agent": "locator", "input": "something else", "session_id": session_id}
    assert_error(await client.post("/v1/runs", json=busy), 409, "state_already_running")
    # Another agent on the session: a conflict too, whatever the session's state.
    other = {"agent": "echo", "input": "hi", "session_id": session_id}
    assert_error(await client.post("/v1/runs", json=other), 409, "state_agent_mismatch")
    assert_error(
        await client.post("/v1/chat", json={"agent": "echo", "message": "hi", "session_id": session_id}),
        409,
        "state_agent_mismatch",
    )
    await client.post(f"/v1/sessions/{session_id}/abort")


async def test_unexpected_errors_are_500_without_details(service: Service, client: httpx.AsyncClient) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals")

    service.executor.store.load_session = broken  # type: ignore[method-assign]
    response = await client.get("/v1/sessions/anything")
    error = assert_error(response, 500, "framework_internal_error")
    assert "secret" not in error["message"]


async def test_auth_header_is_required_even_with_a_valid_body(service: Service) -> None:
    async with anonymous(service) as http:
        assert_error(await http.post("/v1/chat", json={"agent": "echo", "message": "hi"}), 401, "unauthenticated")
        ok = await http.post("/v1/chat", json={"agent": "echo", "message": "hi"}, headers=AUTH)
        assert ok.status_code == 202
