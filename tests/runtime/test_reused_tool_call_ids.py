"""A tool call id the model uses again on a later turn (or step) is a new call, never the old one.

Tool call ids are unique only within one model response for many models (scripted ones, providers
that number their calls), so a session's next turn may call ``c1`` again. Its pending row, its
answer and its ``ctx.idempotency_key`` must be the new call's: an earlier call's answer (or its
approval, given for other arguments) must never be taken for it, and a tool that dedupes an external
side effect by the key must not drop it as a repeat.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import LLMGenerateInput, MockLLMAdapter, ToolContext, ToolResultMessage, define_agent, define_tool
from helix_dbos.orchestration.message_builder import NOT_APPROVED_MESSAGE
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.ids import REUSED_CALL_IDS_PATCH
from helix_dbos.step_result import ParsedToolCall, ToolCallsStepResult
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class CityIn(BaseModel):
    city: str


class Out(BaseModel):
    answer: str


def calls(*items: tuple[str, str, dict[str, Any]]) -> ToolCallsStepResult:
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in items], stop_reason="tool_use"
    )


def finish_with_last_result(inp: LLMGenerateInput) -> ToolCallsStepResult:
    """Finish with the content of the last tool result the model has seen."""
    seen = [m.content for m in inp.messages if isinstance(m, ToolResultMessage)]
    return calls(("fin", "__finish__", {"answer": seen[-1]}))


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def waiting_for(
    executor: DBOSAgentExecutor, session_id: str, run_id: str, *, parked: bool = False
) -> list[tuple[str, str]]:
    """Wait until ``run_id`` waits for its calls (``parked``: has suspended) or ends; its open calls
    as (id, run)."""

    def settled() -> bool:
        run = executor.store.get_run(run_id)
        ended = run is not None and run.status != "running"
        opened = any(c.run_id == run_id for c in executor.list_pending_tool_calls(session_id))
        return ended or (opened and not parked)

    wait_for(settled)
    return [(c.tool_call_id, c.run_id) for c in executor.list_pending_tool_calls(session_id)]


def steps_of(workflow_id: str) -> list[str]:
    return [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]


location = define_tool("get_location", description="Ask the browser", input_schema=CityIn, execute="client")
deleted: list[str] = []


def delete_file(inp: CityIn, ctx: object) -> dict[str, str]:
    deleted.append(inp.city)
    return {"deleted": inp.city}


def answer(executor: DBOSAgentExecutor, session_id: str, call_id: str, result: object) -> None:
    executor.submit_tool_result(session_id, {"kind": "client-tool-result", "tool_call_id": call_id, "result": result})


@pytest.mark.parametrize("hot_window_seconds", [60.0, 0.0])
def test_a_client_tool_call_id_used_again_next_turn_waits_for_a_new_answer(
    make_executor: ExecutorFactory, hot_window_seconds: float
) -> None:
    """Turn 2 calls ``c1`` again: it waits for a new answer (hot, or parked and continued), and
    that answer is the one the model sees, not turn 1's."""
    agent = define_agent(
        f"reused-client-{int(hot_window_seconds)}",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[location],
    )
    model = MockLLMAdapter(
        [
            calls(("c1", "get_location", {"city": "?"})),
            finish_with_last_result,
            calls(("c1", "get_location", {"city": "again?"})),
            finish_with_last_result,
        ]
    )
    executor = make_executor(model, [agent], hot_window_seconds=hot_window_seconds)
    first = executor.execute(agent, "where am I?")
    session_id = first.session_id
    parked = hot_window_seconds == 0
    assert waiting_for(executor, session_id, first.run_id, parked=parked) == [("c1", first.run_id)]
    answer(executor, session_id, "c1", "Lyon")
    assert executor.get_handle(session_id).result().output == Out(answer='"Lyon"')

    second = executor.execute(agent, "and now?", session_id=session_id)
    # Turn 1's answer is not taken for it: it waits for its own.
    assert waiting_for(executor, session_id, second.run_id, parked=parked) == [("c1", second.run_id)]
    [row] = executor.list_pending_tool_calls(session_id)
    assert (row.arguments, row.status, row.submission) == ({"city": "again?"}, "pending", None)
    answer(executor, session_id, "c1", "Oslo")
    result = executor.get_handle(session_id).result()
    assert result.status == "completed" and result.output == Out(answer='"Oslo"')
    assert executor.list_pending_tool_calls(session_id) == []
    assert [r.status for r in executor.store.pending.get(session_id)] == ["applied"]
    # A continuation finds turn 2's call still to answer (turn 1's result is turn 1's call's): the
    # replay patch that reading is under is recorded there, and only there.
    marker = f"DBOS.patch-{REUSED_CALL_IDS_PATCH}"
    marked = [r.run_id for r in executor.list_runs(session_id) if marker in steps_of(r.workflow_id)]
    assert marked == ([f"{session_id}-turn-4"] if parked else [])


def test_an_approval_for_a_call_id_is_not_taken_for_the_next_turns_call(make_executor: ExecutorFactory) -> None:
    """Turn 1 approves deleting ``a.txt`` as ``d1``; turn 2's ``d1`` deletes ``b.txt`` and needs its own
    approval: turn 1's (given for other arguments) must never run it."""
    tool = define_tool("delete_file", input_schema=CityIn, execute=delete_file, require_approval=True)
    agent = define_agent(
        "reused-approval", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[tool]
    )
    model = MockLLMAdapter(
        [
            calls(("d1", "delete_file", {"city": "a.txt"})),
            finish_with_last_result,
            calls(("d1", "delete_file", {"city": "b.txt"})),
            finish_with_last_result,
        ]
    )
    executor = make_executor(model, [agent])
    deleted.clear()
    first = executor.execute(agent, "delete a.txt")
    session_id = first.session_id
    assert waiting_for(executor, session_id, first.run_id) == [("d1", first.run_id)]
    approve = {"kind": "approval-response", "tool_call_id": "d1", "approved": True}
    executor.submit_tool_result(session_id, approve)
    assert first.result().output == Out(answer='{"deleted":"a.txt"}')

    second = executor.execute(agent, "delete b.txt", session_id=session_id)
    assert waiting_for(executor, session_id, second.run_id) == [("d1", second.run_id)]
    assert deleted == ["a.txt"]  # b.txt waits for its own decision
    [row] = executor.list_pending_tool_calls(session_id)
    assert row.arguments == {"city": "b.txt"}
    executor.submit_tool_result(session_id, {"kind": "approval-response", "tool_call_id": "d1", "approved": False})
    assert second.result().output == Out(answer=NOT_APPROVED_MESSAGE)
    assert deleted == ["a.txt"]


def test_a_call_id_used_again_in_a_later_step_of_the_same_run_waits_again(make_executor: ExecutorFactory) -> None:
    """The same run's next model response calls ``c1`` again: its answer was applied, so the new
    call is registered afresh and waits."""
    agent = define_agent(
        "reused-in-run", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location]
    )
    model = MockLLMAdapter(
        [
            calls(("c1", "get_location", {"city": "?"})),
            calls(("c1", "get_location", {"city": "sure?"})),
            finish_with_last_result,
        ]
    )
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "where am I?")
    session_id = handle.session_id
    assert waiting_for(executor, session_id, handle.run_id) == [("c1", handle.run_id)]
    answer(executor, session_id, "c1", "Lyon")
    wait_for(lambda: [c.arguments for c in executor.list_pending_tool_calls(session_id)] == [{"city": "sure?"}])
    answer(executor, session_id, "c1", "Lyon, really")
    assert handle.result().output == Out(answer='"Lyon, really"')


# --- ctx.idempotency_key --------------------------------------------------------------------------------

keys: list[str] = []


def charge(inp: CityIn, ctx: ToolContext) -> dict[str, str]:
    keys.append(ctx.idempotency_key)
    return {"charged": inp.city}


def test_the_idempotency_key_is_scoped_when_a_call_id_was_used_earlier_in_the_session(
    make_executor: ExecutorFactory,
) -> None:
    """Turn 1's ``t1`` keeps the bare key (as every run recorded before keeps it); turn 2's ``t1`` and a
    later step's are scoped by turn and step, so a tool that dedupes by the key runs each of them.
    No step or patch is recorded for it: the decision comes from the transcript."""
    tool = define_tool("charge", input_schema=CityIn, execute=charge)
    agent = define_agent("keyed", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[tool])
    model = MockLLMAdapter(
        [
            calls(("t1", "charge", {"city": "a"}), ("t2", "charge", {"city": "b"})),
            finish_with_last_result,
            calls(("t1", "charge", {"city": "c"})),
            calls(("t1", "charge", {"city": "d"}), ("t3", "charge", {"city": "e"})),
            finish_with_last_result,
        ]
    )
    executor = make_executor(model, [agent])
    keys.clear()
    first = executor.execute(agent, "charge a and b")
    assert first.result().status == "completed"
    sid = first.session_id
    second = executor.execute(agent, "charge c, then d and e", session_id=sid)
    assert second.result().status == "completed"
    assert sorted(keys[:2]) == [f"{sid}:t1", f"{sid}:t2"]
    assert keys[2] == f"{sid}:2.1-t1"
    assert sorted(keys[3:]) == [f"{sid}:2.2-t1", f"{sid}:t3"]
    assert len(set(keys)) == len(keys)
    charge_step = ["keyed.llm", "keyed.tool.charge"]
    assert steps_of(second.workflow_id) == [
        *charge_step,
        *charge_step,
        "keyed.tool.charge",
        "keyed.llm",
        "keyed.finalize",
    ]
