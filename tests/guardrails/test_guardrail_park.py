"""A tool-result approval that parks: the continuation uses the result that ran, never a second run.

PostgreSQL, DBOS, the real LiteLLM adapter against the scripted OpenAI-compatible server. A zero
hot window parks the run as soon as the guard asks; the answer starts the continuation.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from helix_dbos import define_agent, define_tool
from helix_dbos.guardrails import Guardrails, define_guardrail
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.orchestration.message_builder import NOT_APPROVED_MESSAGE
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer
from tests.guardrails.test_guardrails_runs import (
    INJECTION,
    UrlIn,
    config,
    fetch_agent,
    flags_injection,
    server,
    tool_messages,
    wait_for_open_call,
)
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db

__all__ = ["make_executor", "runtime_db", "server"]

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("approved", [True, False])
def test_a_parked_result_approval_does_not_run_the_tool_again(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, approved: bool
) -> None:
    guard = define_guardrail("injection", flags_injection, stages="tool_result", on_trip="approve")
    agent, ran = fetch_agent(server, f"parked-guard-{approved}", guard)
    server.add({"tool_calls": [("fetch_page", {"url": "https://example.com"})]}, {"text": "Done."})
    executor = make_executor(LiteLLMAdapter(), [agent], hot_window_seconds=0)
    handle = executor.execute(agent, "Read example.com")
    assert handle.result(timeout_seconds=60).status == "suspended_client_tool"
    (call,) = executor.list_pending_tool_calls(handle.session_id)
    assert (call.kind, call.delivery, ran) == ("approval", "parked", ["https://example.com"])
    assert server.request_count == 1  # the model has not seen the result while the run is parked

    continued = executor.submit_tool_result(
        handle.session_id,
        {
            "kind": "approval-response",
            "tool_call_id": call.tool_call_id,
            "approved": approved,
            "arguments_digest": call.arguments_digest,
        },
    )
    assert continued is not None
    result = continued.result(timeout_seconds=60)
    assert result.status == "completed" and result.output == "Done."
    assert ran == ["https://example.com"]  # ran once: the person's late answer does not run it again
    (seen,) = tool_messages(server, 1)
    if approved:
        assert INJECTION in seen
    else:
        assert INJECTION not in seen and NOT_APPROVED_MESSAGE in seen


def approve(executor: Any, session_id: str, call: Any) -> Any:
    return executor.submit_tool_result(
        session_id,
        {
            "kind": "approval-response",
            "tool_call_id": call.tool_call_id,
            "approved": True,
            "arguments_digest": call.arguments_digest,
        },
    )


@pytest.mark.parametrize("hot", [True, False])
def test_approving_a_gated_call_does_not_approve_the_result_a_guard_flags(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, hot: bool
) -> None:
    """A ``require_approval`` call approved (hot, or parked and continued) runs; its result trips
    an approving guard, so the person is asked again, about the result, before the model sees it."""
    ran: list[str] = []

    def fetch_page(args: UrlIn, ctx: Any) -> dict[str, str]:
        ran.append(args.url)
        return {"url": args.url, "text": INJECTION}

    tool = define_tool("fetch_page", input_schema=UrlIn, execute=fetch_page, require_approval=True)
    guard = define_guardrail("injection", flags_injection, stages="tool_result", on_trip="approve")
    agent = define_agent(
        f"gated-guarded-{hot}",
        system_prompt="Browse.",
        llm_config=config(server),
        tools=[tool],
        capabilities=[Guardrails([guard])],
    )
    server.add({"tool_calls": [("fetch_page", {"url": "https://example.com"})]}, {"text": "Done."})
    executor = make_executor(LiteLLMAdapter(), [agent], hot_window_seconds=60 if hot else 0)
    handle = executor.execute(agent, "Read example.com")
    if hot:
        first = wait_for_open_call(executor, handle.session_id)
        approve(executor, handle.session_id, first)
        deadline = time.monotonic() + 60
        while not ran:
            assert time.monotonic() < deadline, "the approved call never ran"
            time.sleep(0.05)
        second = wait_for_open_call(executor, handle.session_id)  # asked again: about the result
        current = handle
    else:
        assert handle.result(timeout_seconds=60).status == "suspended_client_tool"
        (first,) = executor.list_pending_tool_calls(handle.session_id)
        current = approve(executor, handle.session_id, first)
        assert current is not None
        assert current.result(timeout_seconds=60).status == "suspended_client_tool"  # asked about the result
        (second,) = executor.list_pending_tool_calls(handle.session_id)
    assert second.tool_call_id == first.tool_call_id and second.status == "pending"
    assert ran == ["https://example.com"] and server.request_count == 1  # the model waits for the answer
    last = approve(executor, handle.session_id, second)
    result = (current if hot else last).result(timeout_seconds=60)
    assert result.status == "completed" and result.output == "Done."
    assert ran == ["https://example.com"]
    (seen,) = tool_messages(server, 1)
    assert INJECTION in seen
