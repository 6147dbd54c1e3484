"""Usage over HTTP: ``GET /v1/sessions/{id}`` carries the rollup; a budget call is
answered through ``POST /v1/sessions/{id}/tool-results`` like any approval.

A real LiteLLM adapter against the scripted server, on PostgreSQL, in-process (ASGI transport).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from helix_dbos import LiteLLMAdapter, define_agent
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.service import create_app
from helix_dbos.testing import ScriptedOpenAIServer
from helix_dbos.usage import Budget
from tests.runtime.conftest import ExecutorFactory
from tests.service.conftest import AUTH, TOKEN

pytestmark = pytest.mark.postgres


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@pytest.fixture
def scripted() -> Iterator[ScriptedOpenAIServer]:
    import_litellm()  # seconds on first use; not inside a test's deadline
    with ScriptedOpenAIServer() as srv:
        yield srv


@pytest.fixture
async def http(scripted: ScriptedOpenAIServer, make_executor: ExecutorFactory) -> AsyncIterator[httpx.AsyncClient]:
    config = {"model": "openai/gpt-4o-mini", "api_base": scripted.base_url, "api_key": "test", "max_retries": 0}
    agents = [
        define_agent("http-usage", system_prompt="Be brief.", llm_config=config),
        define_agent("http-budget", system_prompt="Be brief.", llm_config=config, budget=Budget(max_tokens=100)),
    ]
    executor = make_executor(LiteLLMAdapter(), agents)
    app = create_app(executor, bearer_tokens=[TOKEN])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=AUTH) as c:
        yield c
    for session in executor.store.list_sessions(status="active", limit=100):
        executor.abort(session.session_id, "test teardown")


async def test_the_session_shows_usage(http: httpx.AsyncClient, scripted: ScriptedOpenAIServer) -> None:
    scripted.add({"text": "Hello.", "usage": usage(1000, 20)})
    started = (await http.post("/v1/runs", json={"agent": "http-usage", "input": "hi"})).json()
    session_id = started["session_id"]
    result = (await http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 60})).json()
    assert result["status"] == "completed"
    snapshot = (await http.get(f"/v1/sessions/{session_id}")).json()
    got = snapshot["usage"]
    assert (got["input_tokens"], got["output_tokens"], got["total_tokens"], got["llm_calls"]) == (1000, 20, 1020, 1)
    assert got["cost_usd"] == pytest.approx(1000 * 0.15e-6 + 20 * 0.6e-6)
    assert got["failed"] == {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    schema = (await http.get("/openapi.json")).json()["components"]["schemas"]
    assert "UsageSummary" in schema and "FailedUsage" in schema


async def test_a_run_budget_starts_from_zero_in_each_turn(
    http: httpx.AsyncClient, scripted: ScriptedOpenAIServer
) -> None:
    scripted.add({"text": "One.", "usage": usage(90, 20)})
    started = (await http.post("/v1/runs", json={"agent": "http-budget", "input": "hi"})).json()
    session_id = started["session_id"]
    assert (await http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 60})).json()["status"] == (
        "completed"  # a run-scoped budget: the run ended with its text before any further step
    )
    scripted.add({"text": "Two.", "usage": usage(10, 10)})
    # A second turn of a session budget would ask first; a run budget does not: spend it again.
    again = await http.post("/v1/runs", json={"agent": "http-budget", "input": "more", "session_id": session_id})
    assert again.status_code == 202, again.text
    result = (await http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 60})).json()
    assert result["status"] == "completed"
    snapshot = (await http.get(f"/v1/sessions/{session_id}")).json()
    assert snapshot["usage"]["total_tokens"] == 130


async def test_a_session_budget_approval_over_http(
    scripted: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    config = {"model": "openai/fake", "api_base": scripted.base_url, "api_key": "test", "max_retries": 0}
    agent = define_agent(
        "http-session-budget", system_prompt="Hi.", llm_config=config, budget=Budget(max_tokens=100, scope="session")
    )
    executor = make_executor(LiteLLMAdapter(), [agent])
    app = create_app(executor, bearer_tokens=[TOKEN])
    scripted.add({"text": "One.", "usage": usage(90, 20)}, {"text": "Two.", "usage": usage(1, 1)})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=AUTH) as http:
        sid = (await http.post("/v1/runs", json={"agent": agent.name, "input": "one"})).json()["session_id"]
        await http.get(f"/v1/sessions/{sid}/result", params={"timeout_seconds": 60})
        await http.post("/v1/runs", json={"agent": agent.name, "input": "two", "session_id": sid})
        deadline = time.monotonic() + 60
        while not (snapshot := (await http.get(f"/v1/sessions/{sid}")).json())["pending_tool_calls"]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        (call,) = snapshot["pending_tool_calls"]
        assert (call["kind"], call["tool_name"]) == ("budget", "budget")
        assert call["arguments"]["exceeded"] == {"max_tokens": {"limit": 100, "used": 110}}
        answer = {
            "kind": "approval-response",
            "tool_call_id": call["tool_call_id"],
            "approved": True,
            "arguments_digest": call["arguments_digest"],
        }
        submitted = await http.post(f"/v1/sessions/{sid}/tool-results", json=answer)
        assert submitted.status_code < 300, submitted.text
        result = (await http.get(f"/v1/sessions/{sid}/result", params={"timeout_seconds": 60})).json()
        assert result["status"] == "completed" and result["output"] == "Two."
        again = await http.post(f"/v1/sessions/{sid}/tool-results", json=answer)
        assert again.status_code == 409, again.text
