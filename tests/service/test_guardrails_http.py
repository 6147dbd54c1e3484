"""A tripped output guardrail over HTTP: the run's result is ``failed`` with the ``guardrail_tripped`` error.

A real LiteLLM adapter against the scripted server, on PostgreSQL, in-process (ASGI transport).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from helix_dbos import LiteLLMAdapter, define_agent
from helix_dbos.guardrails import Guardrails, GuardrailVerdict, define_guardrail
from helix_dbos.guardrails.definitions import GuardrailInput
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.service import create_app
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory
from tests.service.conftest import AUTH, TOKEN

pytestmark = pytest.mark.postgres


def no_secrets(given: GuardrailInput) -> GuardrailVerdict:
    if "hunter2" in str(given.value):
        return GuardrailVerdict(tripped=True, reason="the answer contains a password")
    return GuardrailVerdict()


@pytest.fixture
def scripted() -> Iterator[ScriptedOpenAIServer]:
    import_litellm()
    with ScriptedOpenAIServer() as srv:
        yield srv


@pytest.fixture
async def http(scripted: ScriptedOpenAIServer, make_executor: ExecutorFactory) -> AsyncIterator[httpx.AsyncClient]:
    config = {"model": "openai/fake", "api_base": scripted.base_url, "api_key": "test", "max_retries": 0}
    guards = Guardrails([define_guardrail("no_secrets", no_secrets, stages="output")])
    agent = define_agent("http-guarded", system_prompt="Be brief.", llm_config=config, capabilities=[guards])
    executor = make_executor(LiteLLMAdapter(), [agent])
    app = create_app(executor, bearer_tokens=[TOKEN])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=AUTH) as c:
        yield c


async def test_a_tripped_output_guard_fails_the_run_over_http(
    http: httpx.AsyncClient, scripted: ScriptedOpenAIServer
) -> None:
    scripted.add({"text": "It is hunter2."}, {"text": "I cannot share that."})
    started = (await http.post("/v1/runs", json={"agent": "http-guarded", "input": "password?"})).json()
    session_id = started["session_id"]
    result = (await http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 60})).json()
    assert result["status"] == "failed" and result.get("output") is None
    assert result["error"] == "guardrail_tripped: guardrail 'no_secrets' tripped: the answer contains a password"
    snapshot = (await http.get(f"/v1/sessions/{session_id}")).json()
    assert snapshot["status"] == "failed"
