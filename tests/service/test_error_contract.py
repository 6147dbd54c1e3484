"""What clients see of errors: a code that agrees with the HTTP status, and a safe message.

- Every error ``code`` the service can answer maps to exactly one HTTP status, and each route's
  OpenAPI responses document every status it answers, with the codes that status carries.
- A run that failed on a database error tells clients what kind of failure it was, never the SQL
  statement, its parameters, or where the database is: those stay in the server's logs.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from helix_dbos.errors import ERROR_CODES
from helix_dbos.service import create_app
from helix_dbos.service.errors import HTTP_ERROR_CODES, STATUS_BY_CODE
from tests.service.agents import _closed_port
from tests.service.conftest import AUTH, TOKEN, Service
from tests.service.test_routes import assert_error, has_pending, wait_until

pytestmark = pytest.mark.postgres

SECRETS = ("SELECT", "missing_secret_table", "param-s3cret", "[SQL", "[parameters", "sqlalche.me", "pw-s3cret")


def assert_safe(text: str | None, *extra: str) -> None:
    assert text, "an error message is expected"
    for secret in (*SECRETS, "127.0.0.1", "helix@", "postgresql", *extra):
        assert secret not in text, f"{secret!r} leaked to the client: {text!r}"


def sse_events(body: str) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        event = next((line[6:].strip() for line in lines if line.startswith("event:")), "message")
        data = "".join(line[5:].strip() for line in lines if line.startswith("data:"))
        if data:
            events.append((event, json.loads(data)))
    return events


@pytest.mark.parametrize("agent", ["db-sql-error", "db-down"])
async def test_run_errors_reach_clients_without_sql_params_or_hosts(
    service: Service, client: httpx.AsyncClient, agent: str, caplog: pytest.LogCaptureFixture
) -> None:
    session_id = f"{agent}-run"
    response = await client.post("/v1/runs", json={"agent": agent, "input": "hi", "session_id": session_id})
    assert response.status_code == 202, response.text
    with caplog.at_level(logging.WARNING, logger="helix_dbos"):
        result = (await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 15})).json()
    assert result["status"] == "failed"
    assert_safe(result["error"])
    assert "database" in result["error"].lower()

    snapshot = (await client.get(f"/v1/sessions/{session_id}")).json()
    assert snapshot["status"] == "failed"
    assert_safe(snapshot["error"])
    assert_safe(snapshot["current_run"]["error"])
    [run] = (await client.get(f"/v1/sessions/{session_id}/runs")).json()
    assert_safe(run["error"])

    stream = await client.get(f"/v1/sessions/{session_id}/stream")
    events = sse_events(stream.text)
    assert events[-1][0] == "fail", events
    assert_safe(events[-1][1]["error"])
    assert events[-1][1]["code"]
    for _, data in events:
        if data.get("type") == "error":
            assert_safe(data["error"])
    # The details are the operators': the raw error is still recorded server-side.
    raw = service.executor.store.load_session(session_id)
    assert raw is not None and raw.error


def test_every_code_maps_to_exactly_one_status() -> None:
    assert set(STATUS_BY_CODE) == ERROR_CODES | HTTP_ERROR_CODES
    for code, status in STATUS_BY_CODE.items():
        assert 400 <= status <= 599, code
        if code.endswith("_not_found"):
            assert status == 404, code
    assert STATUS_BY_CODE["validation_error"] == STATUS_BY_CODE["validation_invalid_text"] == 422
    assert STATUS_BY_CODE["unauthenticated"] == 401
    assert STATUS_BY_CODE["state_already_running"] == STATUS_BY_CODE["state_concurrency_conflict"] == 409


async def test_not_found_codes_agree_with_404(service: Service, client: httpx.AsyncClient) -> None:
    error = assert_error(
        await client.post("/v1/runs", json={"agent": "ghost", "input": "hi"}), 404, "state_agent_not_found"
    )
    assert "ghost" in error["message"] and "echo" in error["message"]
    assert_error(await client.post("/v1/chat", json={"agent": "ghost", "message": "hi"}), 404, "state_agent_not_found")
    assert_error(await client.get("/v1/nothing-here"), 404, "framework_route_not_found")
    assert_error(await client.delete("/v1/runs"), 405, "framework_method_not_allowed")

    session_id = (await client.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
    await wait_until(client, session_id, has_pending)
    unknown = {"kind": "client-tool-result", "tool_call_id": "nope", "result": {}}
    assert_error(
        await client.post(f"/v1/sessions/{session_id}/tool-results", json=unknown), 404, "state_tool_call_not_found"
    )
    timeout = assert_error(
        await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 0.1}),
        408,
        "transport_result_timeout",
    )
    assert timeout["retryable"] is True
    await client.post(f"/v1/sessions/{session_id}/abort")


async def test_bodies_that_are_not_utf8_json_are_422_not_400(client: httpx.AsyncClient) -> None:
    for path in ["/v1/runs", "/v1/chat", "/v1/sessions/s/abort", "/v1/sessions/s/interrupt", "/v1/sessions/s/retry"]:
        response = await client.post(
            path, content=b"\xff\xfe\x00garbage\xc3", headers={"Content-Type": "application/json"}
        )
        assert_error(response, 422, "validation_error")


async def test_oversized_body_is_413_with_its_own_code(service: Service) -> None:
    app = create_app(service.executor, bearer_tokens=[TOKEN], max_body_bytes=100)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s", headers=AUTH) as http:
        response = await http.post("/v1/runs", json={"agent": "echo", "input": "x" * 200})
        assert_error(response, 413, "validation_body_too_large")


async def test_database_unavailable_during_a_request_is_a_retryable_503(
    service: Service, client: httpx.AsyncClient
) -> None:
    # A real driver error: a connection refused by a port nothing listens on.
    engine = sa.create_engine(f"postgresql+psycopg://helix:pw-s3cret@127.0.0.1:{_closed_port()}/helix")
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError as exc:
        outage = exc
    else:  # pragma: no cover - the port was closed a moment ago
        pytest.fail("expected the connection to be refused")

    def unavailable(*args: object, **kwargs: object) -> None:
        raise outage

    service.executor.store.load_session = unavailable  # type: ignore[method-assign]
    response = await client.get("/v1/sessions/anything")
    error = assert_error(response, 503, "transport_error")
    assert error["retryable"] is True and response.headers["retry-after"]
    assert_safe(error["message"])


def _documented(schema: dict[str, Any], path: str, method: str) -> dict[str, list[str]]:
    """Status -> the error codes its response schema allows (``[]`` for success responses)."""
    components = schema["components"]["schemas"]
    out: dict[str, list[str]] = {}
    for status, response in schema["paths"][path][method]["responses"].items():
        content = response.get("content", {}).get("application/json", {}).get("schema", {})
        ref = content.get("$ref", "")
        codes: list[str] = []
        if ref.startswith("#/components/schemas/Error"):
            info = components[ref.rsplit("/", 1)[1]]["properties"]["error"]
            info = components[info["$ref"].rsplit("/", 1)[1]] if "$ref" in info else info
            codes = info["properties"]["code"]["enum"]
        out[status] = codes
    return out


async def test_openapi_documents_each_routes_statuses_with_their_codes(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    for path, operations in schema["paths"].items():
        for method in operations:
            documented = _documented(schema, path, method)
            for status, codes in documented.items():
                if status.startswith("2"):
                    continue
                assert codes, (path, method, status)
                assert all(STATUS_BY_CODE[code] == int(status) for code in codes), (path, method, status, codes)
            if path.startswith("/v1/"):
                for status in ("401", "422", "500", "503"):
                    assert status in documented, (path, method, status)
            if "{session_id}" in path:
                assert "state_session_not_found" in documented["404"], (path, method)
            if method == "post":
                assert "413" in documented, (path, method)
            assert "400" not in documented, (path, method)
    runs = _documented(schema, "/v1/runs", "post")
    assert set(runs["404"]) == {"state_agent_not_found"}
    assert "state_already_running" in runs["409"]
    assert set(runs["422"]) == {"validation_error", "validation_invalid_text"}
    submit = _documented(schema, "/v1/sessions/{session_id}/tool-results", "post")
    assert set(submit["404"]) == {"state_session_not_found", "state_tool_call_not_found"}
    assert _documented(schema, "/v1/sessions/{session_id}/result", "get")["408"] == ["transport_result_timeout"]
