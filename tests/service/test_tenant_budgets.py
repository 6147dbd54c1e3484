"""Per-tenant budgets: once a tenant's recorded spend reaches its cap, its new runs are refused (429).

A real LiteLLM adapter against the scripted server reports the tokens, on PostgreSQL, in-process
(ASGI transport). ``acme`` has a 500-token budget, ``globex`` none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from helix_dbos import LiteLLMAdapter, TenantBudget, TenantBudgetExceededError, define_agent
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service import create_app
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres

TOKENS = {"acme-budget-token-0123": "acme", "globex-budget-token-0123": "globex"}
ACME = {"Authorization": "Bearer acme-budget-token-0123"}
GLOBEX = {"Authorization": "Bearer globex-budget-token-0123"}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@pytest.fixture
def scripted() -> Iterator[ScriptedOpenAIServer]:
    import_litellm()  # seconds on first use; not inside a test's deadline
    with ScriptedOpenAIServer() as srv:
        yield srv


@pytest.fixture
def executor(scripted: ScriptedOpenAIServer, make_executor: ExecutorFactory) -> DBOSAgentExecutor:
    config = {"model": "openai/gpt-4o-mini", "api_base": scripted.base_url, "api_key": "test", "max_retries": 0}
    agent = define_agent("tenant-budgeted", system_prompt="Be brief.", llm_config=config)
    return make_executor(
        LiteLLMAdapter(), [agent], tenant_budgets={"acme": TenantBudget(max_total_tokens=500, period_seconds=3600)}
    )


@pytest.fixture
async def http(executor: DBOSAgentExecutor) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(executor, bearer_tokens=TOKENS)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


async def _run(http: httpx.AsyncClient, headers: dict[str, str], session_id: str) -> httpx.Response:
    body = {"agent": "tenant-budgeted", "input": "hi", "session_id": session_id}
    started = await http.post("/v1/runs", json=body, headers=headers)
    if started.status_code == 202:
        result = await http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 60}, headers=headers)
        assert result.json()["status"] == "completed", result.text
    return started


async def test_a_tenant_over_its_budget_gets_429_and_nothing_is_written(
    http: httpx.AsyncClient, scripted: ScriptedOpenAIServer, executor: DBOSAgentExecutor
) -> None:
    scripted.add({"text": "Hello.", "usage": usage(400, 200)})  # 600 tokens: acme is now over its 500
    assert (await _run(http, ACME, "acme-b1")).status_code == 202
    assert executor.store.tenant_spend("acme").total_tokens == 600

    refused = await _run(http, ACME, "acme-b2")
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "tenant_budget_exceeded"
    assert error["retryable"] is True  # a budget with a period: the spend leaves the window
    assert "600 tokens" in error["message"] and "500 tokens" in error["message"]
    assert executor.get_session("acme-b2") is None  # refused before anything was written
    for path in ("/v1/sessions/acme-b1/retry", "/v1/chat"):
        body = {"agent": "tenant-budgeted", "message": "again", "session_id": "acme-b1"} if "chat" in path else {}
        response = await http.post(path, json=body, headers=ACME)
        assert (response.status_code, response.json()["error"]["code"]) == (429, "tenant_budget_exceeded"), path
    with pytest.raises(TenantBudgetExceededError):  # the Python API checks it too
        executor.execute("tenant-budgeted", "hi", tenant="acme")

    # Another tenant's spend is its own: globex has no budget, and acme's spend is not globex's.
    scripted.add({"text": "Hi globex.", "usage": usage(10, 5)})
    assert (await _run(http, GLOBEX, "globex-b1")).status_code == 202
    assert executor.store.tenant_spend("globex").total_tokens == 15


def test_an_all_time_budget_is_not_retryable() -> None:
    from helix_dbos.runtime.tenant_budgets import over_budget
    from helix_dbos.store.base import TenantSpend

    capped = TenantBudget(max_cost_usd=1.0)
    assert over_budget(TenantSpend(cost_usd=0.99, total_tokens=10**9), capped) is None
    assert over_budget(TenantSpend(cost_usd=1.0), capped) == ("$1.0000", "$1.0000")
    error = TenantBudgetExceededError("acme", "$1.0000", "$1.0000", periodic=False)
    assert (error.code, error.retryable) == ("tenant_budget_exceeded", False)
