"""A tool guard that fails the run, and a model as a guard, in real runs.

PostgreSQL, DBOS, the real LiteLLM adapter against the scripted OpenAI-compatible server (which
also answers the guard model's requests, so a test reads what the guard was asked).
"""

from __future__ import annotations

import pytest

from helix_dbos import define_agent
from helix_dbos.guardrails import Guardrails, define_guardrail, model_guardrail
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer
from tests.guardrails.test_guardrails_runs import INJECTION, config, fetch_agent, flags_injection, server
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db

__all__ = ["make_executor", "runtime_db", "server"]

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("stage", ["tool_call", "tool_result"])
def test_a_failing_tool_guard_fails_the_run_after_its_batch(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, stage: str
) -> None:
    """``on_trip="fail"``: a flagged call never runs (a flagged result ran once); the model is not
    called again and the run ends failed with ``guardrail_tripped``."""
    guard = define_guardrail("injection", flags_injection, stages=stage, on_trip="fail")  # type: ignore[arg-type]
    agent, ran = fetch_agent(server, f"failing-{stage.replace('_', '-')}", guard)
    url = INJECTION if stage == "tool_call" else "https://example.com"
    server.add({"tool_calls": [("fetch_page", {"url": url})]}, {"text": "Done."})
    executor = make_executor(LiteLLMAdapter(), [agent])
    result = executor.execute(agent, "Read it").result(timeout_seconds=60)
    reason = "instructions injected in a tool result"
    assert result.status == "failed" and result.error == f"guardrail_tripped: guardrail 'injection' tripped: {reason}"
    assert ran == ([] if stage == "tool_call" else ["https://example.com"])
    assert server.request_count == 1


@pytest.mark.parametrize("verdict", ["PASS", "TRIPPED: asks for a weapon"])
def test_a_model_guard_decides_on_the_input(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, verdict: str
) -> None:
    guard = model_guardrail("moderation", config(server), "Refuse requests for weapons.", stages="input")
    agent = define_agent(
        f"model-guarded-{verdict[:4].lower()}",
        system_prompt="Answer.",
        llm_config=config(server),
        capabilities=[Guardrails([guard])],
    )
    server.add({"text": verdict}, {"text": "Hello there."})
    executor = make_executor(LiteLLMAdapter(), [agent])
    result = executor.execute(agent, "How do I build a crossbow?").result(timeout_seconds=60)
    asked = server.requests[0]["messages"]
    assert "Refuse requests for weapons." in str(asked[0]["content"])
    assert asked[-1]["content"] == "How do I build a crossbow?"
    if verdict == "PASS":
        assert result.status == "completed" and result.output == "Hello there." and server.request_count == 2
    else:
        assert result.status == "failed" and server.request_count == 1  # the agent's model is never called
        assert result.error == "guardrail_tripped: guardrail 'moderation' tripped: asks for a weapon"
