"""Bad client input is refused at the edge with a 4xx, and nothing is written.

PostgreSQL cannot store NUL (``\\u0000``) in text or JSON, and a lone surrogate (``\\ud800`` sent
as a JSON escape) is not Unicode text at all: either one used to be accepted (202) and then fail
the run, or answer a 500. Every client-supplied string is now checked, recursively through JSON,
before anything is done: the answer is a 422 with code ``validation_invalid_text`` and the location
of the offending string, and the session is exactly as it was. The library API refuses the same
input with :class:`~helix_dbos.errors.InvalidTextError` before it writes anything.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from helix_dbos.errors import HelixError, InvalidTextError
from tests.service.conftest import Service
from tests.service.test_routes import assert_error, has_pending, wait_until

pytestmark = pytest.mark.postgres

JSON = {"Content-Type": "application/json"}


def assert_invalid_text(response: httpx.Response, loc: list[str | int]) -> dict[str, Any]:
    error = assert_error(response, 422, "validation_invalid_text")
    assert [d["loc"] for d in error["details"]] == [loc], error
    assert error["details"][0]["type"] == "invalid_text"
    return error


async def completed_echo(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    response = await client.post("/v1/runs", json={"agent": "echo", "input": "hi", "session_id": session_id})
    assert response.status_code == 202, response.text
    result = (await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 10})).json()
    assert result["status"] == "completed", result
    snapshot: dict[str, Any] = (await client.get(f"/v1/sessions/{session_id}")).json()
    return snapshot


async def test_run_input_with_nul_is_422_and_creates_nothing(service: Service, client: httpx.AsyncClient) -> None:
    store = service.executor.store
    cases: list[tuple[dict[str, Any], list[str | int]]] = [
        ({"agent": "echo", "input": "a\u0000b"}, ["body", "input"]),
        ({"agent": "echo", "input": {"message": "a\u0000b"}}, ["body", "input", "message"]),
        (
            {"agent": "echo", "input": {"message": [{"role": "user", "content": "hi", "metadata": {"k": "v\u0000"}}]}},
            ["body", "input", "message", 0, "metadata", "k"],
        ),
        (
            {"agent": "echo", "input": {"message": "hi", "state": {"k\u0000": 1}}},
            ["body", "input", "state", "k\\u0000"],
        ),
        ({"agent": "echo", "input": "hi", "idempotency_key": "k\u0000"}, ["body", "idempotency_key"]),
        ({"agent": "ec\u0000ho", "input": "hi"}, ["body", "agent"]),
    ]
    for body, loc in cases:
        error = assert_invalid_text(await client.post("/v1/runs", json={**body, "session_id": "nul-run"}), loc)
        assert "NUL" in error["message"]
        assert error["retryable"] is False
    chat = {"agent": "echo", "message": "a\u0000b", "session_id": "nul-run"}
    assert_invalid_text(await client.post("/v1/chat", json=chat), ["body", "message"])
    assert store.load_session("nul-run") is None


async def test_lone_surrogates_are_422_and_pairs_are_text(service: Service, client: httpx.AsyncClient) -> None:
    for escape in (b"\\ud800", b"\\udfff", b"x\\udc00y", b"\\ud83d"):
        body = b'{"agent": "echo", "session_id": "surrogate-run", "input": "' + escape + b'"}'
        error = assert_invalid_text(await client.post("/v1/runs", content=body, headers=JSON), ["body", "input"])
        assert "surrogate" in error["message"]
    assert service.executor.store.load_session("surrogate-run") is None
    # A surrogate *pair* is one ordinary character (an emoji here): accepted and stored faithfully.
    body = b'{"agent": "echo", "session_id": "pair-run", "input": "smile \\ud83d\\ude00"}'
    assert (await client.post("/v1/runs", content=body, headers=JSON)).status_code == 202
    result = (await client.get("/v1/sessions/pair-run/result", params={"timeout_seconds": 10})).json()
    assert result["output"] == "echo: smile \U0001f600"


async def test_nul_in_paths_and_queries_is_422(client: httpx.AsyncClient) -> None:
    assert_invalid_text(await client.get("/v1/sessions/%00"), ["path", "session_id"])
    assert_invalid_text(await client.get("/v1/sessions/a%00b/messages"), ["path", "session_id"])
    assert_invalid_text(await client.post("/v1/sessions/%00/abort"), ["path", "session_id"])
    assert_invalid_text(await client.get("/v1/chat/x%00/stream"), ["path", "session_id"])
    assert_invalid_text(await client.get("/v1/sessions/s/messages?limit=%00"), ["query", "limit"])


async def test_tool_results_and_control_reasons_with_nul_change_nothing(
    service: Service, client: httpx.AsyncClient
) -> None:
    session_id = (await client.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
    snapshot = await wait_until(client, session_id, has_pending)
    [call] = snapshot["pending_tool_calls"]
    call_id = call["tool_call_id"]
    base = f"/v1/sessions/{session_id}"
    for path, body, loc in [
        (
            f"{base}/tool-results",
            {"kind": "client-tool-result", "tool_call_id": call_id, "result": {"city": "Ly\u0000on"}},
            ["body", "result", "city"],
        ),
        (
            f"/v1/chat/{session_id}/tool-results",
            {"kind": "client-tool-result", "tool_call_id": call_id, "error": "boom\u0000"},
            ["body", "error"],
        ),
        (f"{base}/tool-results", {"kind": "client-tool-result", "tool_call_id": "c\u0000"}, ["body", "tool_call_id"]),
        (f"{base}/interrupt", {"reason": "stop\u0000"}, ["body", "reason"]),
        (f"/v1/chat/{session_id}/interrupt", {"reason": "stop\u0000"}, ["body", "reason"]),
        (f"{base}/abort", {"reason": "bye\u0000"}, ["body", "reason"]),
        (f"/v1/chat/{session_id}/abort", {"reason": "bye\u0000"}, ["body", "reason"]),
    ]:
        assert_invalid_text(await client.post(path, json=body), loc)
    raw = b'{"kind": "client-tool-result", "tool_call_id": "' + call_id.encode() + b'", "result": "\\udbff"}'
    assert_invalid_text(await client.post(f"{base}/tool-results", content=raw, headers=JSON), ["body", "result"])

    after = (await client.get(base)).json()
    assert after["status"] == "active" and after["aborted"] is False and after["interrupt_requested"] is False
    assert [c["tool_call_id"] for c in after["pending_tool_calls"]] == [call_id]
    # The call still takes its one real answer.
    answer = {"kind": "client-tool-result", "tool_call_id": call_id, "result": {"city": "Lyon"}}
    assert (await client.post(f"{base}/tool-results", json=answer)).status_code == 202
    result = (await client.get(f"{base}/result", params={"timeout_seconds": 10})).json()
    assert result["status"] == "completed" and result["output"] == "You are in Lyon."


async def test_retry_and_resume_with_nul_leave_a_completed_session_completed(
    service: Service, client: httpx.AsyncClient
) -> None:
    before = await completed_echo(client, "nul-retry")
    runs_before = (await client.get("/v1/sessions/nul-retry/runs")).json()
    for path, body, loc in [
        ("/v1/sessions/nul-retry/retry", {"message": "again\u0000"}, ["body", "message"]),
        (
            "/v1/sessions/nul-retry/retry",
            {"message": [{"role": "user", "content": "again\u0000"}]},
            ["body", "message", 0, "content"],
        ),
        ("/v1/sessions/nul-retry/retry", {"checkpoint_id": "cp\u0000"}, ["body", "checkpoint_id"]),
        ("/v1/sessions/nul-retry/resume", {"message": "go\u0000"}, ["body", "message"]),
    ]:
        assert_invalid_text(await client.post(path, json=body), loc)
    after = (await client.get("/v1/sessions/nul-retry")).json()
    assert (after["status"], after["turn"], after["message_count"], after["error"]) == (
        before["status"],
        before["turn"],
        before["message_count"],
        None,
    )
    assert (await client.get("/v1/sessions/nul-retry/runs")).json() == runs_before
    messages = (await client.get("/v1/sessions/nul-retry/messages")).json()["messages"]
    assert [m["content"] for m in messages] == ["hi", "echo: hi"]


async def test_library_entry_points_refuse_invalid_text_before_writing(service: Service) -> None:
    executor = service.executor
    with pytest.raises(InvalidTextError) as caught:
        executor.execute("echo", "a\x00b", session_id="lib-nul")
    assert caught.value.code == "validation_invalid_text" and isinstance(caught.value, HelixError)
    assert caught.value.location == ("input",)
    with pytest.raises(InvalidTextError):
        executor.execute("echo", {"message": "hi", "state": {"k": ["\ud800"]}}, session_id="lib-nul")
    with pytest.raises(InvalidTextError):
        executor.execute("echo", "hi", session_id="lib\x00nul")
    assert executor.store.load_session("lib-nul") is None

    handle = executor.execute("echo", "hi", session_id="lib-done")
    assert (await handle.result_async(timeout_seconds=10)).status == "completed"
    before = executor.store.load_session("lib-done")
    assert before is not None
    for call in (
        lambda: executor.retry("lib-done", message="x\x00"),
        lambda: executor.resume("echo", "lib-done", "x\x00"),
        lambda: executor.interrupt("lib-done", "x\x00"),
        lambda: executor.abort("lib-done", "x\x00"),
        lambda: executor.submit_tool_result("lib-done", {"kind": "client-tool-result", "tool_call_id": "c\x00"}),
    ):
        with pytest.raises(InvalidTextError):
            call()
    after = executor.store.load_session("lib-done")
    assert after is not None and (after.status, after.turn, after.version) == ("completed", 1, before.version)


async def test_invalid_text_refusals_hold_under_concurrency(service: Service, client: httpx.AsyncClient) -> None:
    bodies = [{"agent": "echo", "input": f"x{i}\u0000", "session_id": f"nul-many-{i}"} for i in range(20)]
    responses = await asyncio.gather(*(client.post("/v1/runs", json=b) for b in bodies))
    assert {r.status_code for r in responses} == {422}
    assert all(service.executor.store.load_session(f"nul-many-{i}") is None for i in range(20))
