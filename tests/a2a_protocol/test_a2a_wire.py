"""The A2A endpoint on the wire: bad requests are JSON-RPC errors (never a 500), the 0.3 names work.

Raw JSON over HTTP against the live ``serve --a2a`` process, so what is checked is exactly what a
client of any language sees.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.a2a_protocol.agents import ACME_TOKEN
from tests.a2a_protocol.conftest import A2AService

V1 = {"A2A-Version": "1.0"}


def rpc(a2a: A2AService, agent: str, method: str, params: Any, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return a2a.serve.http.post(f"/a2a/{agent}", json=body, headers={**V1, **headers})


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" not in body, body
    error: dict[str, Any] = body["error"]
    return error


def message(text: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}], **fields}


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("NoSuchMethod", {}, -32601),
        ("SendMessage", {"message": {"parts": "not a list"}}, -32602),
        ("SendMessage", {"message": message("")}, -32602),  # nothing to say
        ("SendMessage", {"message": {**message("hi"), "messageId": ""}}, -32602),
        ("SendMessage", {"message": message("hi", contextId="bad id/with slash")}, -32602),
        ("GetTask", {"id": "no-such-run"}, -32001),
        ("CancelTask", {"id": "no-such-run"}, -32001),
        ("ListTasks", {}, -32602),
        ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "http://example.invalid"}, -32003),
        ("GetExtendedAgentCard", {}, -32004),
    ],
)
def test_bad_requests_are_json_rpc_errors(a2a: A2AService, method: str, params: Any, code: int) -> None:
    assert error_of(rpc(a2a, "writer", method, params))["code"] == code


def test_malformed_bodies_and_versions_are_json_rpc_errors(a2a: A2AService) -> None:
    raw = a2a.serve.http.post("/a2a/writer", content=b"{not json", headers={"content-type": "application/json"})
    assert error_of(raw)["code"] == -32700
    batch = a2a.serve.http.post("/a2a/writer", json=[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}])
    assert error_of(batch)["code"] == -32600
    wrong = rpc(a2a, "writer", "GetTask", {"id": "x"}, **{"A2A-Version": "9.0"})
    assert error_of(wrong)["code"] == -32009  # version not supported


def test_a_task_of_another_agent_is_not_found(a2a: A2AService) -> None:
    sent = rpc(a2a, "writer", "SendMessage", {"message": message("mine")}).json()["result"]["task"]
    assert error_of(rpc(a2a, "digger", "GetTask", {"id": sent["id"]}))["code"] == -32001
    reused = rpc(a2a, "digger", "SendMessage", {"message": message("take it", contextId=sent["contextId"])})
    assert error_of(reused)["code"] == -32602  # the context is another agent's session


def test_unknown_agent_and_missing_credentials_are_typed_http_errors(a2a: A2AService) -> None:
    missing = rpc(a2a, "nobody", "GetTask", {"id": "x"})
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "state_agent_not_found")
    card = a2a.serve.http.get("/a2a/nobody/.well-known/agent-card.json")
    assert (card.status_code, card.json()["error"]["code"]) == (404, "state_agent_not_found")
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message("hi")}}
    anonymous = httpx.post(f"{a2a.serve.base_url}/a2a/writer", json=body, headers=V1)
    assert (anonymous.status_code, anonymous.json()["error"]["code"]) == (401, "unauthenticated")


def test_the_0_3_method_names_work_on_the_same_endpoint(a2a: A2AService) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "a",
        "method": "message/send",
        "params": {"message": {"messageId": str(uuid.uuid4()), "role": "user", "kind": "message",
                               "parts": [{"kind": "text", "text": "old"}]}},
    }  # fmt: skip
    sent = a2a.serve.http.post("/a2a/writer", json=body).json()["result"]
    assert (sent["kind"], sent["status"]["state"]) == ("task", "completed"), sent
    assert sent["artifacts"][0]["parts"][0]["text"] == "Wrote: old"
    got = a2a.serve.http.post(
        "/a2a/writer", json={"jsonrpc": "2.0", "id": "b", "method": "tasks/get", "params": {"id": sent["id"]}}
    ).json()["result"]
    assert (got["id"], got["contextId"], got["status"]["state"]) == (sent["id"], sent["contextId"], "completed")
    bad = a2a.serve.http.post(
        "/a2a/writer", json={"jsonrpc": "2.0", "id": "c", "method": "tasks/cancel", "params": {"id": "nope"}}
    ).json()
    assert bad["error"]["code"] == -32001


def test_a_task_or_context_of_another_tenant_is_not_found(a2a: A2AService) -> None:
    sent = rpc(a2a, "writer", "SendMessage", {"message": message("ours")}).json()["result"]["task"]
    acme = {"Authorization": f"Bearer {ACME_TOKEN}"}
    assert error_of(rpc(a2a, "writer", "GetTask", {"id": sent["id"]}, **acme))["code"] == -32001
    assert error_of(rpc(a2a, "writer", "CancelTask", {"id": sent["id"]}, **acme))["code"] == -32001
    listed = rpc(a2a, "writer", "ListTasks", {"contextId": sent["contextId"]}, **acme).json()["result"]
    assert listed.get("tasks", []) == []
    taken = rpc(a2a, "writer", "SendMessage", {"message": message("mine now", contextId=sent["contextId"])}, **acme)
    assert error_of(taken)["code"] == -32602
    own = rpc(a2a, "writer", "SendMessage", {"message": message("acme's")}, **acme).json()["result"]["task"]
    session = a2a.serve.http.get(f"/v1/sessions/{own['contextId']}", headers=acme).json()
    assert session["status"] == "completed"  # acme's own session, visible to acme
    assert a2a.serve.http.get(f"/v1/sessions/{own['contextId']}").status_code == 404  # and not to the default tenant
