"""``recover_conversation`` / ``load_conversation_messages`` (seed 002 "Recovery") and
``RetryOptions.abort_signal``, on PostgreSQL with real DBOS runs (issue 17 items 4 and 5)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import AbortSignal, MockLLMAdapter, RetryOptions, define_agent, define_tool
from helix_dbos.errors import SessionNotFoundError
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.store.conversation import load_conversation_messages, recover_conversation
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class PathIn(BaseModel):
    path: str


def said(text: str) -> TextStepResult:
    return TextStepResult(content=text, should_stop=True, stop_reason="end_turn")


def calls(*items: tuple[str, str, dict[str, Any]]) -> ToolCallsStepResult:
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in items], stop_reason="tool_use"
    )


def test_recover_conversation_of_a_completed_and_a_suspended_run(make_executor: ExecutorFactory) -> None:
    gated = define_tool("rm", input_schema=PathIn, execute=lambda inp, ctx: "ok", require_approval=True)
    agent = define_agent("recoverable", system_prompt="x", llm_config="openai/fake", tools=[gated])
    model = MockLLMAdapter([said("hello"), calls(("d1", "rm", {"path": "/x"})), said("done")])
    executor = make_executor(model, [agent], hot_window_seconds=0.2)

    done = executor.execute(agent, "hi")
    assert done.result().status == "completed"
    recovered = recover_conversation(state_store=executor.store, run_id=done.run_id)
    assert [m.role for m in recovered.messages] == ["user", "assistant"]
    assert recovered.can_resume is False and recovered.reason is not None
    assert load_conversation_messages(executor.store, done.run_id) == recovered.messages

    parked = executor.execute(agent, "delete /x")
    assert parked.result().status == "suspended_client_tool"
    again = recover_conversation(state_store=executor.store, run_id=parked.run_id)
    assert again.can_resume is True and again.can_resume == executor.can_resume(parked.session_id).can_resume
    assert again.messages[-1].role == "assistant"  # the gated call, waiting for its answer

    with pytest.raises(SessionNotFoundError):
        recover_conversation(state_store=executor.store, run_id="no-such-run")


def test_retry_abort_signal_aborts_the_retried_run(make_executor: ExecutorFactory) -> None:
    started = threading.Event()

    def slow(inp: PathIn, ctx: Any) -> str:
        started.set()
        ctx.abort_signal.wait(20)
        return "stopped" if ctx.abort_signal.aborted else "finished"

    agent = define_agent(
        "retry-abortable",
        system_prompt="x",
        llm_config="openai/fake",
        tools=[define_tool("slow", input_schema=PathIn, execute=slow)],
    )
    model = MockLLMAdapter([said("first"), calls(("s1", "slow", {"path": "/y"})), said("never")])
    executor = make_executor(model, [agent])
    first = executor.execute(agent, "go")
    assert first.result().status == "completed"

    signal = AbortSignal()
    retried = first.retry(RetryOptions(abort_signal=signal, message="again"))
    assert started.wait(20)
    t0 = time.monotonic()
    signal.abort("user left")
    result = retried.result(timeout_seconds=30)
    assert result.status == "failed" and "user left" in (result.error or "")
    assert time.monotonic() - t0 < 10
    assert executor.can_resume(retried.session_id).can_resume is False
