"""A session belongs to one agent: another agent cannot run on it (issue 9 item 5)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from helix_dbos import AgentMismatchError, MockLLMAdapter, define_agent, define_tool
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class CityIn(BaseModel):
    city: str


def ask_call() -> ToolCallsStepResult:
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id="c1", name="ask_browser", arguments={"city": "?"})], stop_reason="tool_use"
    )


def said(text: str) -> TextStepResult:
    return TextStepResult(content=text, should_stop=True, stop_reason="end_turn")


def test_execute_with_another_agent_is_refused_and_writes_nothing(make_executor: ExecutorFactory) -> None:
    first = define_agent("owner-agent", system_prompt="x", llm_config="openai/fake")
    ask = define_tool("ask_browser", input_schema=CityIn, execute="client")
    other = define_agent("other-agent", system_prompt="y", llm_config="openai/fake", tools=[ask])
    model = MockLLMAdapter(
        [
            said("hello"),
            ask_call(),
            said("bye"),
        ]
    )
    executor = make_executor(model, [first, other], hot_window_seconds=0.2)
    handle = executor.execute(first, "hi")
    assert handle.result().status == "completed"
    before = executor.store.load_session(handle.session_id)
    assert before is not None

    with pytest.raises(AgentMismatchError) as caught:
        executor.execute(other, "now you", session_id=handle.session_id)
    assert caught.value.code == "state_agent_mismatch"
    assert "owner-agent" in caught.value.message and "other-agent" in caught.value.message
    # By name too, and with an idempotency key: the check comes before anything else.
    with pytest.raises(AgentMismatchError):
        executor.execute("other-agent", "now you", session_id=handle.session_id, idempotency_key="k1")

    after = executor.store.load_session(handle.session_id)
    assert after is not None
    assert (after.turn, after.message_count, after.version, after.status) == (
        before.turn,
        before.message_count,
        before.version,
        "completed",
    )
    assert len(executor.list_runs(handle.session_id)) == 1
    assert model.call_count == 1

    # The owner continues the session as before.
    again = executor.execute(first, "again", session_id=handle.session_id)
    assert again.result().status == "completed"


def test_resume_with_another_agent_uses_the_same_error(make_executor: ExecutorFactory) -> None:
    ask = define_tool("ask_browser", input_schema=CityIn, execute="client")
    owner = define_agent("parking-owner", system_prompt="x", llm_config="openai/fake", tools=[ask])
    stranger = define_agent("parking-stranger", system_prompt="x", llm_config="openai/fake")
    model = MockLLMAdapter(
        [
            ask_call(),
            said("Paris it is"),
        ]
    )
    executor = make_executor(model, [owner, stranger], hot_window_seconds=0.2)
    handle = executor.execute(owner, "where?")
    assert handle.result().status == "suspended_client_tool"
    with pytest.raises(AgentMismatchError):
        executor.resume(stranger, handle.session_id)
    with pytest.raises(AgentMismatchError):
        executor.execute(stranger, "hijack", session_id=handle.session_id)

    # The parked answer continues under the session's own agent: the answer is used and applied.
    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Paris"}
    )
    assert continued is not None
    assert continued.result().status == "completed"
    state = continued.get_state()
    results = [m for m in state.messages if m.role == "tool"]
    assert [m.content for m in results] == ['"Paris"']
    assert find_unpaired_tool_call_ids(state.messages) == []
    assert [c.status for c in executor.store.pending.get(handle.session_id)] == ["applied"]


def test_the_store_refuses_another_agent_under_the_row_lock(make_executor: ExecutorFactory) -> None:
    """The executor's check reads before the transaction; the store's holds under the lock (a race)."""
    from helix_dbos.store.base import StartRun
    from helix_dbos.store.engine import now_ms

    owner = define_agent("locked-owner", system_prompt="x", llm_config="openai/fake")
    executor = make_executor(MockLLMAdapter([said("hi")]), [owner])
    handle = executor.execute(owner, "hi")
    assert handle.result().status == "completed"
    before = executor.store.load_session(handle.session_id)
    assert before is not None
    with pytest.raises(AgentMismatchError):
        executor.store.start_run(
            StartRun(
                session_id=handle.session_id,
                run_id=f"{handle.session_id}-turn-2",
                workflow_id=f"{handle.session_id}-turn-2",
                agent_type="someone-else",
                new_session_state={},  # as a request that found no session a moment earlier would send
                now_ms=now_ms(),
            )
        )
    after = executor.store.load_session(handle.session_id)
    assert after is not None and (after.version, after.turn) == (before.version, before.turn)
