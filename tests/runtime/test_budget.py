"""Budgets on PostgreSQL through the real LiteLLM adapter: crossing suspends, approve goes on, deny fails.

The scripted server's usage decides when a limit is crossed: 80 tokens per model call against a
100-token budget crosses after the second call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, define_agent, define_tool
from helix_dbos.errors import ToolCallAlreadyAnsweredError
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.stream.chunks import StreamChunk, ToolApprovalRequestChunk
from helix_dbos.testing import ScriptedOpenAIServer
from helix_dbos.usage import Budget
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class CityIn(BaseModel):
    city: str


weather = define_tool("get_weather", input_schema=CityIn, execute=lambda inp, ctx: {"sky": "sun"})


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def tool_step(city: str) -> dict[str, Any]:
    return {"tool_calls": [("get_weather", {"city": city})], "usage": usage(70, 10)}


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    """Import LiteLLM before any deadline starts: its import alone takes seconds (20 s under load)."""
    import_litellm()


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def budgeted(server: ScriptedOpenAIServer, name: str, budget: Budget, model: str = "openai/fake") -> Any:
    config = {"model": model, "api_base": server.base_url, "api_key": "test", "max_retries": 0}
    return define_agent(name, system_prompt="Be brief.", llm_config=config, tools=[weather], budget=budget)


def wait_for_budget_call(executor: DBOSAgentExecutor, session_id: str, timeout: float = 60.0) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        calls = executor.list_pending_tool_calls(session_id)
        if calls:
            return calls
        time.sleep(0.02)
    raise AssertionError("no pending budget call")


def chunks(executor: DBOSAgentExecutor, session_id: str) -> list[StreamChunk]:
    async def read() -> list[StreamChunk]:
        stream = await executor.read_stream(session_id)
        assert stream is not None
        out: list[StreamChunk] = []
        async for chunk in stream:
            out.append(chunk)
        return out

    return asyncio.run(asyncio.wait_for(read(), 10))


def test_crossing_suspends_and_approving_continues_with_the_raised_limit(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    server.add(tool_step("Paris"), tool_step("Lima"), tool_step("Oslo"), {"text": "Done.", "usage": usage(5, 5)})
    agent = budgeted(server, "budget-approve", Budget(max_tokens=100))
    executor = make_executor(LiteLLMAdapter(), [agent])
    handle = executor.execute(agent, "Weather?")

    (call,) = wait_for_budget_call(executor, handle.session_id)
    assert (call.kind, call.tool_name, call.tool_call_id) == ("budget", "budget", f"budget:{handle.run_id}:2")
    assert call.arguments == {
        "scope": "run",
        "exceeded": {"max_tokens": {"limit": 100, "used": 160}},
        "raise_to": {"max_tokens": 260},
    }
    time.sleep(0.3)
    assert server.request_count == 2  # suspended between steps: no model call while waiting

    continued = executor.submit_tool_result(
        handle.session_id,
        {
            "kind": "approval-response",
            "tool_call_id": call.tool_call_id,
            "approved": True,
            "arguments_digest": call.arguments_digest,
        },
    )
    assert continued is not None and continued.run_id == handle.run_id  # hot: the same run goes on
    result = handle.result(timeout_seconds=60)
    assert result.status == "completed" and result.output == "Done."
    assert server.request_count == 4  # 240 < 260 after the third call: no second crossing
    assert result.usage is not None and result.usage.total_tokens == 250
    assert result.usage.client_tool_waits == 1  # the approval's wait is recorded like a client's
    with pytest.raises(ToolCallAlreadyAnsweredError):  # exactly once
        executor.submit_tool_result(
            handle.session_id, {"kind": "approval-response", "tool_call_id": call.tool_call_id, "approved": False}
        )
    request = next(c for c in chunks(executor, handle.session_id) if isinstance(c, ToolApprovalRequestChunk))
    assert (request.tool_name, request.tool_call_id, request.arguments_digest) == (
        "budget",
        call.tool_call_id,
        call.arguments_digest,
    )


def test_denying_fails_the_run_with_a_clear_error(server: ScriptedOpenAIServer, make_executor: ExecutorFactory) -> None:
    server.add(tool_step("Paris"), tool_step("Lima"), tool_step("Oslo"))
    agent = budgeted(server, "budget-deny", Budget(max_tokens=100))
    executor = make_executor(LiteLLMAdapter(), [agent])
    handle = executor.execute(agent, "Weather?")
    (call,) = wait_for_budget_call(executor, handle.session_id)
    executor.submit_tool_result(
        handle.session_id,
        {"kind": "approval-response", "tool_call_id": call.tool_call_id, "approved": False, "reason": "too pricey"},
    )
    result = handle.result(timeout_seconds=60)
    assert result.status == "failed"
    assert result.error == (
        "Budget exceeded (run max_tokens 100, used 160) and more spending was not approved: too pricey"
    )
    assert server.request_count == 2
    session = executor.get_session(handle.session_id)
    assert session is not None and session.status == "failed"


def test_a_wrong_digest_is_refused_and_a_mismatched_answer_never_approves(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    server.add(tool_step("Paris"), tool_step("Lima"))
    agent = budgeted(server, "budget-digest", Budget(max_tokens=100))
    executor = make_executor(LiteLLMAdapter(), [agent])
    handle = executor.execute(agent, "Weather?")
    (call,) = wait_for_budget_call(executor, handle.session_id)
    from helix_dbos import HelixError

    with pytest.raises(HelixError) as refused:
        executor.submit_tool_result(
            handle.session_id,
            {
                "kind": "approval-response",
                "tool_call_id": call.tool_call_id,
                "approved": True,
                "arguments_digest": "0" * 64,
            },
        )
    assert refused.value.code == "state_conflict"
    with pytest.raises(HelixError) as wrong_kind:
        executor.submit_tool_result(
            handle.session_id, {"kind": "client-tool-result", "tool_call_id": call.tool_call_id, "result": "ok"}
        )
    assert "budget approval" in str(wrong_kind.value)
    executor.abort(handle.session_id, "test over")


def test_a_parked_budget_call_is_continued_by_its_approval(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    server.add(tool_step("Paris"), tool_step("Lima"), {"text": "Done.", "usage": usage(5, 5)})
    agent = budgeted(server, "budget-park", Budget(max_tokens=100))
    executor = make_executor(LiteLLMAdapter(), [agent], hot_window_seconds=0.2)
    handle = executor.execute(agent, "Weather?")
    result = handle.result(timeout_seconds=60)
    assert result.status == "suspended_client_tool"
    budget_id = f"budget:{handle.run_id}:2"
    assert result.suspended == {"tool_call_ids": [budget_id]}
    assert executor.can_resume(handle.session_id).can_resume
    outcome = handle.outcome()
    assert outcome.kind == "suspended_client_tool" and list(outcome.pending_client_tool_calls) == [budget_id]

    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "approval-response", "tool_call_id": budget_id, "approved": True}
    )
    assert continued is not None and continued.run_id != handle.run_id
    final = continued.result(timeout_seconds=60)
    assert final.status == "completed" and final.output == "Done."
    assert server.request_count == 3
    assert executor.list_pending_tool_calls(handle.session_id) == []
    assert [r.status for r in executor.list_runs(handle.session_id)] == ["suspended", "completed"]
    assert continued.session_usage().total_tokens == 170


def test_a_parked_budget_call_denied_fails_the_continuation(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    server.add(tool_step("Paris"), tool_step("Lima"))
    agent = budgeted(server, "budget-park-deny", Budget(max_tokens=100))
    executor = make_executor(LiteLLMAdapter(), [agent], hot_window_seconds=0.2)
    handle = executor.execute(agent, "Weather?")
    assert handle.result(timeout_seconds=60).status == "suspended_client_tool"
    continued = executor.submit_tool_result(
        handle.session_id,
        {"kind": "approval-response", "tool_call_id": f"budget:{handle.run_id}:2", "approved": False},
    )
    assert continued is not None
    result = continued.result(timeout_seconds=60)
    assert result.status == "failed" and result.error is not None and "not approved" in result.error
    assert server.request_count == 2


def test_a_cost_budget_crosses_on_priced_usage(server: ScriptedOpenAIServer, make_executor: ExecutorFactory) -> None:
    # gpt-4o-mini: 1e6 prompt tokens cost $0.15; the first call alone crosses $0.10.
    server.add({"tool_calls": [("get_weather", {"city": "Paris"})], "usage": usage(1_000_000, 10)})
    agent = budgeted(server, "budget-cost", Budget(max_cost_usd=0.10), model="openai/gpt-4o-mini")
    executor = make_executor(LiteLLMAdapter(), [agent])
    handle = executor.execute(agent, "Weather?")
    (call,) = wait_for_budget_call(executor, handle.session_id)
    exceeded = call.arguments["exceeded"]["max_cost_usd"]
    assert exceeded["limit"] == 0.10 and exceeded["used"] == pytest.approx(0.150006)
    assert call.arguments["raise_to"]["max_cost_usd"] == pytest.approx(0.250006)
    executor.abort(handle.session_id, "test over")


def test_a_session_budget_counts_earlier_runs_and_asks_before_the_first_call(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory
) -> None:
    server.add({"text": "One.", "usage": usage(90, 20)}, {"text": "Two.", "usage": usage(5, 5)})
    agent = budgeted(server, "budget-session", Budget(max_tokens=100, scope="session"))
    executor = make_executor(LiteLLMAdapter(), [agent])
    first = executor.execute(agent, "one")
    assert first.result(timeout_seconds=60).status == "completed"  # 110 tokens: the run ended first
    second = executor.execute(agent, "two", session_id=first.session_id)
    (call,) = wait_for_budget_call(executor, first.session_id)
    assert call.tool_call_id == f"budget:{second.run_id}:0"
    assert call.arguments["exceeded"] == {"max_tokens": {"limit": 100, "used": 110}}
    assert server.request_count == 1
    executor.submit_tool_result(
        first.session_id, {"kind": "approval-response", "tool_call_id": call.tool_call_id, "approved": True}
    )
    assert second.result(timeout_seconds=60).status == "completed"
    assert server.request_count == 2
