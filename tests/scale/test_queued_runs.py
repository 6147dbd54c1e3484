"""``launch(queue=RunQueue(...))`` in one process on PostgreSQL: queued starts keep ``execute``'s contract.

The process both enqueues and dequeues here (the multi-process topology is ``test_scale_out.py``):
what is checked is that every kind of start lands on the queue under its deterministic workflow
id, that a repeat gets the same run, that ``AgentAlreadyRunningError`` is unchanged, and that a
HITL continuation keeps the priority of the run it continues.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import (
    AgentAlreadyRunningError,
    HelixError,
    LLMGenerateInput,
    ToolResultMessage,
    define_agent,
    define_tool,
)
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.launch import launch, shutdown
from helix_dbos.runtime.queues import RateLimit, RunQueue, register_run_queue
from helix_dbos.runtime.starting import RunStarter
from helix_dbos.step_result import ParsedToolCall, StepResult, TextStepResult, ToolCallsStepResult
from tests.pg import create_database, drop_database, unique_name

pytestmark = pytest.mark.postgres

QUEUE = RunQueue(name="test-runs", concurrency=4, polling_interval_sec=0.01)


class CityIn(BaseModel):
    city: str


ask_city = define_tool("ask_city", description="Ask the client", input_schema=CityIn, execute="client")
slow = define_agent("slow", system_prompt="Take your time.", llm_config="scripted/slow")
quick = define_agent("quick", system_prompt="Answer at once.", llm_config="scripted/quick")
asker = define_agent("asker", system_prompt="Ask where.", llm_config="scripted/asker", tools=[ask_city])


class Model:
    """``slow`` answers after 0.5 s; ``asker`` asks the client for a city, then names it."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        last = input.messages[-1]
        if input.agent_type == "quick":
            return TextStepResult(content="quick done", should_stop=True, stop_reason="end_turn")
        if input.agent_type == "slow":
            await asyncio.sleep(0.5)
            return TextStepResult(content="slow done", should_stop=True, stop_reason="end_turn")
        if isinstance(last, ToolResultMessage):
            return TextStepResult(content=f"in {last.content}", should_stop=True, stop_reason="end_turn")
        call = ParsedToolCall(id=f"ask-{len(input.messages)}", name="ask_city", arguments={"city": "?"})
        return ToolCallsStepResult(tool_calls=[call], stop_reason="tool_use")


@pytest.fixture(scope="module")
def executor(pg_server_url: str) -> Iterator[DBOSAgentExecutor]:
    name = unique_name("queued")
    url = create_database(pg_server_url, name)
    executor = launch(
        url,
        agents=[slow, quick, asker],
        llm_adapter=Model(),
        queue=QUEUE,
        hot_window_seconds=0,  # park at once: an answer then starts a continuation run
        background_tasks=False,
    )
    try:
        yield executor
    finally:
        shutdown(executor)
        drop_database(pg_server_url, name)


def _queue_and_priority(workflow_id: str) -> tuple[str | None, int | None]:
    status = DBOS.get_workflow_status(workflow_id)
    assert status is not None
    return status.queue_name, status.priority


def test_a_queued_run_keeps_the_execute_contract(executor: DBOSAgentExecutor) -> None:
    handle = executor.execute(slow, "go", session_id="q-contract", priority=5)
    assert _queue_and_priority(handle.run_id) == (QUEUE.name, 5)
    again = executor.execute(slow, "go", session_id="q-contract", priority=5)
    assert again.run_id == handle.run_id  # the identical request meets the same run
    with pytest.raises(AgentAlreadyRunningError):
        executor.execute(slow, "something else", session_id="q-contract")
    assert handle.result(timeout_seconds=30).status == "completed"

    keyed = executor.execute(slow, "keyed", idempotency_key="q-key")
    assert keyed.result(timeout_seconds=30).status == "completed"
    assert executor.execute(slow, "keyed", idempotency_key="q-key").run_id == keyed.run_id


def test_retry_and_hitl_continuations_go_through_the_queue(executor: DBOSAgentExecutor) -> None:
    first = executor.execute(asker, "where am I?", session_id="q-hitl", priority=7)
    assert first.result(timeout_seconds=30).status in ("suspended", "suspended_client_tool")
    (call,) = executor.list_pending_tool_calls("q-hitl")
    continued = executor.submit_tool_result(
        "q-hitl", {"kind": "client-tool-result", "tool_call_id": call.tool_call_id, "result": {"city": "Lima"}}
    )
    assert continued is not None and continued.run_id != first.run_id
    assert _queue_and_priority(continued.run_id) == (QUEUE.name, 7)  # the continuation keeps its priority
    assert continued.result(timeout_seconds=30).status == "completed"

    retried = executor.retry("q-contract", priority=3)
    assert _queue_and_priority(retried.run_id) == (QUEUE.name, 3)
    assert retried.result(timeout_seconds=30).status == "completed"


def test_the_rate_limit_spaces_out_starts(executor: DBOSAgentExecutor) -> None:
    limited = RunQueue(name="test-limited", limiter=RateLimit(limit=2, period_seconds=1.0), polling_interval_sec=0.01)
    register_run_queue(limited)
    executor.queue = limited
    try:
        handles = [executor.execute(quick, f"n{i}", session_id=f"q-limit-{i}") for i in range(6)]
        for handle in handles:
            assert handle.result(timeout_seconds=30).status == "completed"
    finally:
        executor.queue = QUEUE
    statuses = DBOS.list_workflows(workflow_ids=[h.run_id for h in handles], load_input=False, load_output=False)
    starts = sorted(int(w.dequeued_at or 0) for w in statuses)
    assert {w.queue_name for w in statuses} == {limited.name} and all(starts)
    # No rolling one-second window holds more than two starts.
    assert all(later - earlier >= 1000 for earlier, later in zip(starts, starts[2:], strict=False)), starts


def test_bad_priorities_and_settings_are_refused() -> None:
    with pytest.raises(HelixError) as caught:  # refused before the starter touches anything of its own
        RunStarter.execute(object(), slow, "x", priority=0)  # type: ignore[arg-type]
    assert caught.value.code == "validation_error"
    with pytest.raises(ValueError, match="needs a queue"):
        launch("postgresql://nowhere/none", execute=False)


def test_runs_wait_in_their_tenants_partition(executor: DBOSAgentExecutor) -> None:
    first = executor.execute(asker, "where am I?", session_id="q-tenant", tenant="acme")
    assert first.result(timeout_seconds=30).status in ("suspended", "suspended_client_tool")
    (call,) = executor.list_pending_tool_calls("q-tenant")
    continued = executor.submit_tool_result(
        "q-tenant", {"kind": "client-tool-result", "tool_call_id": call.tool_call_id, "result": {"city": "Oslo"}}
    )
    assert continued is not None and continued.result(timeout_seconds=30).status == "completed"
    untenanted = executor.execute(quick, "hi", session_id="q-default")
    assert untenanted.result(timeout_seconds=30).status == "completed"
    keys = {}
    for run_id in (first.run_id, continued.run_id, untenanted.run_id):
        status = DBOS.get_workflow_status(run_id)
        assert status is not None
        keys[run_id] = status.queue_partition_key
    # The HITL continuation, started by the answer, stays in the session's tenant's partition.
    assert keys == {first.run_id: "acme", continued.run_id: "acme", untenanted.run_id: "default"}
