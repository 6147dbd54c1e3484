"""Tenancy over HTTP: one tenant's sessions are invisible to another, on every route that names one.

Two bearer tokens of two tenants share one service. Tenant A owns a session (finished, with a
checkpoint) and another waiting for a client tool's answer; tenant B tries every route that takes a
session id, and the bodies that name one, and must get the same 404 ``state_session_not_found`` as
for an id that does not exist (not a 403: existence is not revealed), with nothing changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from starlette.requests import Request

from helix_dbos import MockLLMAdapter, create_sub_agent_tool, define_agent
from helix_dbos.errors import ServiceAuthConfigError, SessionNotFoundError
from helix_dbos.service import BearerPrincipal, TenantPrincipal, create_app
from helix_dbos.service.auth import principal_scope, principal_tenant
from helix_dbos.tenancy import DEFAULT_TENANT
from tests.runtime.conftest import ExecutorFactory
from tests.service.agents import agents, model
from tests.service.conftest import Service

pytestmark = pytest.mark.timeout(60)

TOKENS = {"token-acme-0123456789": "acme", "token-globex-0123456789": "globex"}
ACME = {"Authorization": "Bearer token-acme-0123456789"}
GLOBEX = {"Authorization": "Bearer token-globex-0123456789"}


@pytest.fixture
def tenant_service(make_executor: ExecutorFactory) -> Service:
    executor = make_executor(model(), agents)
    return Service(executor, create_app(executor, bearer_tokens=TOKENS, sse_ping_seconds=1.0))


@pytest.fixture
async def http(tenant_service: Service) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=tenant_service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
        yield client


async def _finished_session(http: httpx.AsyncClient, headers: dict[str, str], session_id: str) -> str:
    started = await http.post(
        "/v1/runs", json={"agent": "echo", "input": "hi", "session_id": session_id}, headers=headers
    )
    assert started.status_code == 202, started.text
    result = await http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 10}, headers=headers)
    assert result.json()["status"] == "completed", result.text
    return session_id


async def _request(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    # A route that let the request through could wait (a stream, a result): bounded, so a leak fails fast.
    return await asyncio.wait_for(http.request(method, path, **kwargs), timeout=5)


def _assert_not_found(response: httpx.Response, what: str) -> None:
    assert response.status_code == 404, f"{what}: {response.status_code} {response.text}"
    assert response.json()["error"]["code"] == "state_session_not_found", what


async def test_another_tenants_session_is_not_found_on_every_route(
    tenant_service: Service, http: httpx.AsyncClient
) -> None:
    sid = await _finished_session(http, ACME, "acme-echo-1")
    own_checkpoints = (await http.get(f"/v1/sessions/{sid}/checkpoints", headers=ACME)).json()
    checkpoint_id = own_checkpoints["items"][0]["id"]
    timeline = (await http.get(f"/v1/sessions/{sid}/timeline", headers=ACME)).json()
    run_id = timeline["runs"][0]["run_id"]
    before = tenant_service.executor.get_session(sid)
    answer = {"kind": "client-tool-result", "tool_call_id": "x", "result": 1}
    attempts: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", f"/v1/sessions/{sid}", {}),
        ("GET", f"/v1/sessions/{sid}/messages", {}),
        ("GET", f"/v1/sessions/{sid}/runs", {}),
        ("GET", f"/v1/sessions/{sid}/result", {"params": {"timeout_seconds": 0}}),
        ("GET", f"/v1/sessions/{sid}/stream", {}),
        ("GET", f"/v1/sessions/{sid}/checkpoints", {}),
        ("GET", f"/v1/sessions/{sid}/timeline", {}),
        ("GET", f"/v1/sessions/{sid}/state", {}),
        ("GET", f"/v1/sessions/{sid}/model-view", {"params": {"run_id": run_id, "step": 1}}),
        ("GET", f"/v1/chat/{sid}/stream", {}),
        ("POST", f"/v1/sessions/{sid}/resume", {"json": {"message": "again"}}),
        ("POST", f"/v1/sessions/{sid}/retry", {"json": {}}),
        ("POST", f"/v1/sessions/{sid}/interrupt", {"json": {"reason": "mine now"}}),
        ("POST", f"/v1/sessions/{sid}/abort", {"json": {"reason": "mine now"}}),
        ("POST", f"/v1/sessions/{sid}/tool-results", {"json": answer}),
        ("POST", f"/v1/sessions/{sid}/fork", {"json": {"checkpoint_id": checkpoint_id, "new_session_id": "stolen"}}),
        ("POST", f"/v1/chat/{sid}/tool-results", {"json": answer}),
        ("POST", f"/v1/chat/{sid}/interrupt", {"json": {}}),
        ("POST", f"/v1/chat/{sid}/abort", {"json": {}}),
        ("POST", "/v1/runs", {"json": {"agent": "echo", "input": "next turn", "session_id": sid}}),
        ("POST", "/v1/chat", {"json": {"agent": "echo", "message": "next turn", "session_id": sid}}),
    ]
    for method, path, kwargs in attempts:
        refused = await _request(http, method, path, headers=GLOBEX, **kwargs)
        _assert_not_found(refused, f"{method} {path}")
        # Word for word what an unknown id gets: nothing tells "someone else's" from "nobody's".
        unknown = await _request(http, method, path.replace(sid, "no-such-session"), headers=GLOBEX, **kwargs)
        expected = unknown.json()["error"]
        expected["message"] = expected["message"].replace("no-such-session", sid)
        assert refused.json() == {"error": expected}, f"{method} {path}"
    after = tenant_service.executor.get_session(sid)
    assert after is not None and before is not None
    assert (after.version, after.turn, after.aborted) == (before.version, before.turn, before.aborted)
    assert tenant_service.executor.get_session("stolen") is None
    # The owner still sees everything.
    assert (await http.get(f"/v1/sessions/{sid}", headers=ACME)).status_code == 200


async def test_listings_show_a_tenant_its_own_sessions_only(http: httpx.AsyncClient) -> None:
    await _finished_session(http, ACME, "acme-listed")
    await _finished_session(http, GLOBEX, "globex-listed")
    acme = {row["session_id"] for row in (await http.get("/v1/sessions", headers=ACME)).json()["items"]}
    globex = {row["session_id"] for row in (await http.get("/v1/sessions", headers=GLOBEX)).json()["items"]}
    assert "acme-listed" in acme and "globex-listed" not in acme
    assert "globex-listed" in globex and "acme-listed" not in globex


async def test_same_session_id_twice_is_one_tenants_not_a_shared_session(http: httpx.AsyncClient) -> None:
    await _finished_session(http, ACME, "contested")
    # Tenant B naming A's id for a new session is refused as unknown, never appended to A's transcript.
    refused = await http.post(
        "/v1/runs", json={"agent": "echo", "input": "x", "session_id": "contested"}, headers=GLOBEX
    )
    _assert_not_found(refused, "start on another tenant's id")
    messages = (await http.get("/v1/sessions/contested/messages", headers=ACME)).json()
    assert [m["content"] for m in messages["messages"] if m["role"] == "user"] == ["hi"]


async def test_a_fork_stays_in_its_sources_tenant(http: httpx.AsyncClient) -> None:
    sid = await _finished_session(http, ACME, "acme-forked")
    forked = await http.post(f"/v1/sessions/{sid}/fork", json={"new_session_id": "acme-fork-1"}, headers=ACME)
    assert forked.status_code in (200, 201), forked.text
    assert (await http.get("/v1/sessions/acme-fork-1", headers=ACME)).status_code == 200
    _assert_not_found(await http.get("/v1/sessions/acme-fork-1", headers=GLOBEX), "another tenant's fork")


async def test_an_authenticate_hooks_principal_names_its_tenant(make_executor: ExecutorFactory) -> None:
    executor = make_executor(model(), agents)

    def authenticate(request: Request) -> Any:
        who = request.headers.get("x-user", "")
        if who == "ann":
            return TenantPrincipal(subject="ann", tenant="acme")
        if who == "bob":
            return {"sub": "bob", "tenant": "globex"}
        if who == "carl":
            return "carl"  # names no tenant: the default one
        return None

    app = create_app(executor, authenticate=authenticate)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service") as client:
        ann, bob, carl = ({"x-user": name} for name in ("ann", "bob", "carl"))
        await _finished_session(client, ann, "ann-1")
        session = executor.get_session("ann-1")
        assert session is not None and session.tenant == "acme"
        _assert_not_found(await client.get("/v1/sessions/ann-1", headers=bob), "hook tenant")
        _assert_not_found(await client.get("/v1/sessions/ann-1", headers=carl), "hook default tenant")
        # The same idempotency key of two tenants' principals never meets on one session.
        body = {"agent": "echo", "input": "hi", "idempotency_key": "k-1"}
        first = (await client.post("/v1/runs", json=body, headers=ann)).json()["session_id"]
        second = (await client.post("/v1/runs", json=body, headers=bob)).json()["session_id"]
        assert first != second


def test_the_tenant_a_principal_names() -> None:
    assert principal_tenant(None) == principal_tenant("someone") == DEFAULT_TENANT
    assert principal_tenant(BearerPrincipal(token_index=0, subject="s", tenant="acme")) == "acme"
    assert principal_tenant({"tenant": "globex"}) == principal_tenant(TenantPrincipal("x", "globex")) == "globex"
    with pytest.raises(ServiceAuthConfigError):
        principal_tenant({"tenant": "no spaces allowed"})
    with pytest.raises(ServiceAuthConfigError):
        create_app(None, bearer_tokens={"tok": "bad tenant"})  # type: ignore[arg-type]
    # A default-tenant principal keeps the scope it always had (its keys name the same sessions).
    assert principal_scope("carl") == "principal:carl"
    assert principal_scope(TenantPrincipal("ann", "acme")) == "tenant:acme/principal:ann"


class _Topic(BaseModel):
    topic: str


class _Findings(BaseModel):
    summary: str


def _calls(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_calls", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def test_a_sub_agents_session_is_its_parents_tenants(make_executor: ExecutorFactory) -> None:
    researcher = define_agent(
        "tenant-researcher", system_prompt="Research.", output_schema=_Findings, llm_config="openai/gpt-4o-mini"
    )
    planner = define_agent(
        "tenant-planner",
        system_prompt="Delegate.",
        tools=[create_sub_agent_tool(researcher, _Topic, timeout_ms=60_000)],
        llm_config="openai/gpt-4o-mini",
    )
    model = MockLLMAdapter(
        [
            {
                "type": "tool_calls",
                "tool_calls": [{"id": "r1", "name": "subagent__tenant-researcher", "arguments": {"topic": "t"}}],
            },
            {"type": "tool_calls", "tool_calls": [{"id": "f1", "name": "__finish__", "arguments": {"summary": "s"}}]},
            {"type": "text", "content": "done", "should_stop": True, "stop_reason": "end_turn"},
        ]
    )
    executor = make_executor(model, [planner])
    handle = executor.execute(planner, "go", session_id="tenant-plan-1", tenant="acme")
    assert handle.result(timeout_seconds=30).output == "done"
    (ref,) = executor.store.get_sub_session_refs("tenant-plan-1")
    child = executor.get_session(ref.sub_session_id)
    assert child is not None and child.parent_session_id == "tenant-plan-1"
    assert child.tenant == "acme"
    # And the Python API refuses another tenant's session as unknown.
    with pytest.raises(SessionNotFoundError):
        executor.execute(planner, "again", session_id="tenant-plan-1", tenant="globex")
