"""Usage and cost on PostgreSQL, through the real LiteLLM adapter against the scripted server.

Every figure is checked against what the scripted OpenAI-compatible server actually sent
(``ScriptedOpenAIServer.usage_sent``) and priced independently from LiteLLM's bundled cost map.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, define_agent, define_tool
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres

PRICED = "openai/gpt-4o-mini"
"""A model LiteLLM's cost map prices (called at the scripted server through ``api_base``)."""


class CityIn(BaseModel):
    city: str


weather = define_tool("get_weather", input_schema=CityIn, execute=lambda inp, ctx: {"city": inp.city, "sky": "sun"})
location = define_tool("get_location", input_schema=CityIn, execute="client")


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    """Import LiteLLM before any deadline starts: its import alone takes seconds (20 s under load)."""
    import_litellm()


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def price(model: str, sent: dict[str, Any]) -> float:
    """The cost of one response from LiteLLM's cost map, computed here by hand."""
    import litellm

    info = litellm.model_cost[model.split("/", 1)[1]]
    cached = sent["prompt_tokens_details"]["cached_tokens"]
    return float(
        (sent["prompt_tokens"] - cached) * info["input_cost_per_token"]
        + cached * info["cache_read_input_token_cost"]
        + sent["completion_tokens"] * info["output_cost_per_token"]
    )


def agent_at(server: ScriptedOpenAIServer, name: str, *, model: str = PRICED, **kwargs: Any) -> Any:
    kwargs.setdefault("tools", [weather])
    config = {"model": model, "api_base": server.base_url, "api_key": "test", "max_retries": 1}
    return define_agent(name, system_prompt="Be brief.", llm_config=config, **kwargs)


def test_totals_equal_the_sum_of_the_scripted_servers_usage(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    server.add(
        {"tool_calls": [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lima"})]}
        | {"usage": usage(1200, 40, cached=1024)},
        {"tool_calls": [("get_weather", {"city": "Oslo"})], "usage": usage(1350, 35, cached=1024, reasoning=12)},
        {"text": "Sunny everywhere.", "usage": usage(1500, 9)},
    )
    agent = agent_at(server, "usage-totals")
    executor = make_executor(LiteLLMAdapter(), [agent])
    handle = executor.execute(agent, "Weather in Paris, Lima, Oslo?")
    result = handle.result(timeout_seconds=60)
    assert result.status == "completed"

    sent = server.usage_sent
    assert len(sent) == 3  # the server reports usage on every response (streamed: the usage chunk)
    summary = result.usage
    assert summary is not None
    assert summary.input_tokens == sum(u["prompt_tokens"] for u in sent) == 4050
    assert summary.output_tokens == sum(u["completion_tokens"] for u in sent) == 84
    assert summary.total_tokens == 4134
    assert summary.cached_input_tokens == 2048
    assert summary.reasoning_tokens == 12
    assert summary.cost_usd == pytest.approx(sum(price(PRICED, u) for u in sent), rel=1e-9)
    assert summary.cost_usd > 0
    assert (summary.llm_calls, summary.unpriced_llm_calls) == (3, 0)
    assert (summary.tool_calls, summary.failed_tool_calls) == (3, 0)
    assert summary.llm_duration_ms > 0 and summary.tool_duration_ms >= 0
    assert summary.failed.llm_calls == 0
    # the same rollup from every place it is exposed
    assert handle.usage() == summary
    assert executor.get_usage_summary(handle.session_id) == summary
    assert executor.get_usage_summary(handle.session_id, handle.run_id) == summary
    rows = executor.store.get_usage(handle.session_id)
    llm_rows = [r for r in rows if r.kind == "llm"]
    expected = [(1, PRICED, 1200), (2, PRICED, 1350), (3, PRICED, 1500)]
    assert [(r.step, r.name, r.input_tokens) for r in llm_rows] == expected
    assert all(r.cost_usd is not None and r.value is not None and r.value > 0 for r in llm_rows)
    assert {r.run_id for r in rows} == {handle.run_id}


def test_a_second_turn_adds_up_per_run_and_per_session(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    server.add({"text": "One.", "usage": usage(100, 10)}, {"text": "Two.", "usage": usage(200, 20)})
    agent = agent_at(server, "usage-turns", tools=[])
    executor = make_executor(LiteLLMAdapter(), [agent])
    first = executor.execute(agent, "one")
    assert first.result(timeout_seconds=60).status == "completed"
    second = executor.execute(agent, "two", session_id=first.session_id)
    result = second.result(timeout_seconds=60)
    assert result.usage is not None and (result.usage.input_tokens, result.usage.output_tokens) == (200, 20)
    session = second.session_usage()
    assert (session.input_tokens, session.output_tokens, session.llm_calls) == (300, 30, 2)
    assert session.cost_usd == pytest.approx(sum(price(PRICED, u) for u in server.usage_sent))


def test_an_unknown_model_has_no_cost_and_does_not_fail(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    server.add({"text": "Hi.", "usage": usage(30, 3)})
    agent = agent_at(server, "usage-unpriced", model="openai/not-a-real-model", tools=[])
    executor = make_executor(LiteLLMAdapter(), [agent])
    result = executor.execute(agent, "hi").result(timeout_seconds=60)
    assert result.status == "completed"
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.cost_usd, result.usage.unpriced_llm_calls) == (30, 0.0, 1)


def test_a_billed_attempt_that_failed_is_kept_apart(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    """The provider answered (and billed) tool-call JSON that does not parse; the adapter retried."""
    server.add(
        {"tool_calls": [("get_weather", {})], "raw_arguments": '{"city": "Par', "usage": usage(500, 7)},
        {"tool_calls": [("get_weather", {"city": "Paris"})], "usage": usage(500, 8)},
        {"text": "Sunny.", "usage": usage(600, 2)},
    )
    agent = agent_at(server, "usage-billed-retry")
    executor = make_executor(LiteLLMAdapter(sleep=_no_sleep), [agent])
    handle = executor.execute(agent, "Paris?")
    summary = handle.result(timeout_seconds=60).usage
    assert summary is not None
    assert server.request_count == 3
    assert (summary.llm_calls, summary.input_tokens, summary.output_tokens) == (2, 1100, 10)
    assert (summary.failed.llm_calls, summary.failed.input_tokens, summary.failed.output_tokens) == (1, 500, 7)
    assert summary.failed.cost_usd == pytest.approx(price(PRICED, server.usage_sent[0]))
    assert summary.billed_tokens == sum(u["total_tokens"] for u in server.usage_sent)
    failed = [r for r in executor.store.get_usage(handle.session_id) if r.kind == "llm" and not r.success]
    assert [(r.step, r.input_tokens) for r in failed] == [(1, 500)]


def test_a_call_that_fails_after_billing_fails_the_run_and_shows_what_it_cost(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    broken = {"tool_calls": [("get_weather", {})], "raw_arguments": "{", "usage": usage(400, 5)}
    server.add(broken, broken)  # max_retries=1: two billed attempts, both unusable
    agent = agent_at(server, "usage-billed-failure")
    executor = make_executor(LiteLLMAdapter(sleep=_no_sleep), [agent])
    result = executor.execute(agent, "Paris?").result(timeout_seconds=60)
    assert result.status == "failed"
    assert result.usage is not None
    assert (result.usage.llm_calls, result.usage.total_tokens) == (0, 0)
    assert (result.usage.failed.llm_calls, result.usage.failed.input_tokens) == (2, 800)


def test_client_tool_wait_is_recorded(server: ScriptedOpenAIServer, make_executor: ExecutorFactory) -> None:
    server.add(
        {"tool_calls": [{"id": "loc1", "name": "get_location", "arguments": {"city": "?"}}], "usage": usage(50, 5)},
        {"text": "You are in Oslo.", "usage": usage(60, 6)},
    )
    agent = agent_at(server, "usage-client-wait", tools=[location])
    executor = make_executor(LiteLLMAdapter(), [agent])
    handle = executor.execute(agent, "Where am I?")
    deadline = time.time() + 60
    while not executor.list_pending_tool_calls(handle.session_id):
        assert time.time() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "loc1", "result": "Oslo"}
    )
    summary = handle.result(timeout_seconds=60).usage
    assert summary is not None
    assert summary.client_tool_waits == 1
    assert 300 <= summary.client_tool_wait_ms < 60_000
    assert (summary.tool_calls, summary.llm_calls) == (1, 2)  # the client's result is a tool result


def test_a_retried_run_has_its_own_usage_and_the_failed_one_stays_counted(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    """The seeds' ``RetryOptions.usage_store`` on DBOS: every run (a retry is a new run) records its
    usage in the session store under its own run id; nothing to pass."""
    server.add(
        {"tool_calls": [("get_weather", {})], "raw_arguments": "{", "usage": usage(300, 4)},  # billed, unusable
        {"text": "Sunny.", "usage": usage(310, 3)},
    )
    agent = define_agent(
        "usage-retry",
        system_prompt="Be brief.",
        llm_config={"model": PRICED, "api_base": server.base_url, "api_key": "test", "max_retries": 0},
        tools=[weather],
    )
    executor = make_executor(LiteLLMAdapter(), [agent])
    first = executor.execute(agent, "Paris?")
    failed = first.result(timeout_seconds=60)
    assert failed.status == "failed" and failed.usage is not None
    assert (failed.usage.llm_calls, failed.usage.failed.input_tokens) == (0, 300)
    retried = first.retry()
    result = retried.result(timeout_seconds=60)
    assert result.status == "completed" and result.usage is not None
    assert (result.usage.input_tokens, result.usage.failed.llm_calls) == (310, 0)  # the retried run alone
    session = retried.session_usage()
    assert (session.input_tokens, session.failed.input_tokens) == (310, 300)  # the failed run was billed too
    assert session.billed_tokens == sum(u["total_tokens"] for u in server.usage_sent)


def _slow_weather(inp: CityIn, ctx: object) -> dict[str, str]:
    time.sleep(0.25)
    return {"city": inp.city, "sky": "sun"}


def test_each_calls_duration_is_what_it_took(server: ScriptedOpenAIServer, make_executor: ExecutorFactory) -> None:
    """A model that answers after 0.3 s and a tool that takes 0.25 s: the records say so (not just > 0)."""
    server.add(
        {"tool_calls": [("get_weather", {"city": "Paris"})], "usage": usage(100, 5), "delay_seconds": 0.3},
        {"text": "Sunny.", "usage": usage(120, 2)},
    )
    slow = define_tool("get_weather", input_schema=CityIn, execute=_slow_weather)
    agent = agent_at(server, "usage-durations", tools=[slow])
    executor = make_executor(LiteLLMAdapter(), [agent])
    handle = executor.execute(agent, "Paris?")
    summary = handle.result(timeout_seconds=60).usage
    assert summary is not None
    rows = {(r.kind, r.step): r for r in executor.store.get_usage(handle.session_id)}
    first_llm, tool = rows[("llm", 1)], rows[("tool", 1)]
    assert first_llm.value is not None and 300 <= first_llm.value < 30_000
    assert tool.value is not None and 250 <= tool.value < 30_000
    assert summary.tool_duration_ms == tool.value
    assert summary.llm_duration_ms >= first_llm.value
