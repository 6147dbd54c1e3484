"""Human in the loop and run control on PostgreSQL (seeds 001 "Client-Executed Tools",
"Approval-Gated Tools", "Resume runId semantics"; 002 requireApproval, SubmitToolResult, RetryOptions)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import (
    AgentHooks,
    AgentNotResumableError,
    HelixError,
    LLMGenerateInput,
    MockLLMAdapter,
    SessionNotFoundError,
    ToolResultMessage,
    define_agent,
    define_tool,
)
from helix_dbos.errors import PendingToolCallNotFoundError, ToolCallAlreadyAnsweredError
from helix_dbos.orchestration.message_builder import NOT_APPROVED_MESSAGE, find_unpaired_tool_call_ids
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.hitl import wake_run
from helix_dbos.step_result import ParsedToolCall, ToolCallsStepResult
from helix_dbos.store.base import PendingToolCall
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


def finish_with_results(inp: LLMGenerateInput) -> ToolCallsStepResult:
    """Finish with the content of every tool result the model has seen (so tests can check them)."""
    seen = [m.content for m in inp.messages if isinstance(m, ToolResultMessage)]
    return calls(("fin", "__finish__", {"answer": " | ".join(seen)}))


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def open_ids(executor: DBOSAgentExecutor, session_id: str) -> list[str]:
    return [c.tool_call_id for c in executor.list_pending_tool_calls(session_id)]


location = define_tool("get_location", description="Ask the browser", input_schema=CityIn, execute="client")
deleted: list[str] = []


def delete_file(inp: CityIn, ctx: object) -> dict[str, str]:
    deleted.append(inp.city)
    return {"deleted": inp.city}


def client_agent(name: str = "client-agent", **kwargs: Any) -> Any:
    return define_agent(
        name, system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location], **kwargs
    )


def test_client_tool_round_trip_hot(make_executor: ExecutorFactory) -> None:
    agent = client_agent()
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "where am I?")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    state = executor.get_state(handle.session_id)
    assert state is not None and state.status == "suspended_client_tool"  # while it waits
    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": {"city": "Lyon"}}
    )
    assert continued is not None and continued.run_id == handle.run_id  # woke the same run
    result = handle.result()
    assert result.status == "completed"
    assert result.output == Out(answer='{"city":"Lyon"}')
    assert len(executor.list_runs(handle.session_id)) == 1
    assert find_unpaired_tool_call_ids(handle.get_state().messages) == []


def test_a_hot_answer_rides_in_its_wake_up_and_needs_no_check_step(make_executor: ExecutorFactory) -> None:
    """The submission sends the row it recorded with the wake-up and ``recv`` records it, so the
    woken run goes from ``DBOS.recv`` straight to the model; an approval's answer likewise."""
    agent = client_agent("wake-answer-agent")
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "where am I?")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    wait_for(lambda: "DBOS.sleep" in [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)])
    executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Oslo"}
    )
    result = handle.result()
    assert result.status == "completed" and result.output == Out(answer='"Oslo"')
    steps = steps_of(handle.workflow_id)
    registered = steps.index("wake-answer-agent.hitl.register")
    assert steps[registered:] == [  # no hitl.check after the wake-up
        "wake-answer-agent.hitl.register",
        "DBOS.recv",
        "DBOS.sleep",  # recv's timeout, recorded when it started waiting
        "wake-answer-agent.llm",
        "wake-answer-agent.finalize",
    ]
    assert executor.list_pending_tool_calls(handle.session_id) == []  # the answer was applied


def test_a_submission_reads_the_session_and_run_it_wakes_in_its_own_transaction(
    make_executor: ExecutorFactory,
) -> None:
    """The store's submission returns the session and the call's run as its transaction read them
    (with the batch), so waking the run needs no further read."""
    agent = client_agent("outcome-agent")
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "where?")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    outcome = executor.store.pending.submit(handle.session_id, "c1", {"kind": "client-tool-result", "result": "X"})
    assert outcome.run == executor.store.get_run(handle.run_id)
    assert outcome.session == executor.store.load_session(handle.session_id)
    assert (outcome.call.status, outcome.delivery, outcome.batch_complete) == ("answered", "hot", True)
    wake_run(outcome.call.workflow_id, "c1", executor.logger, outcome.call)
    assert handle.result().status == "completed"


def test_a_batch_answered_call_by_call_checks_until_the_last_answer(make_executor: ExecutorFactory) -> None:
    """Two calls: the first wake-up leaves a call open, so the run checks the store; the last
    answer (carried or read) completes the batch, and both results reach the model."""
    agent = client_agent("two-call-agent")
    executor = make_executor(
        MockLLMAdapter(
            [calls(("c1", "get_location", {"city": "?"}), ("c2", "get_location", {"city": "!"})), finish_with_results]
        ),
        [agent],
    )
    handle = executor.execute(agent, "where?")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1", "c2"])
    executor.submit_tool_result(handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "A"})
    time.sleep(0.2)
    executor.submit_tool_result(handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c2", "result": "B"})
    result = handle.result()
    assert result.status == "completed" and result.output == Out(answer='"A" | "B"')
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)]
    assert "two-call-agent.hitl.check" in steps  # the first answer left c2 open: the store was read


def test_list_pending_tool_calls_shows_what_a_session_waits_for(make_executor: ExecutorFactory) -> None:
    """The public way to see a session's open calls (no reaching through ``executor.store``)."""
    agent = client_agent("lister")
    executor = make_executor(
        MockLLMAdapter(
            [calls(("c1", "get_location", {"city": "a"}), ("c2", "get_location", {"city": "b"})), finish_with_results]
        ),
        [agent],
    )
    assert executor.list_pending_tool_calls("no-such-session") == []
    handle = executor.execute(agent, "where?")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1", "c2"])
    first = executor.list_pending_tool_calls(handle.session_id)[0]
    assert (first.tool_name, first.kind, first.arguments, first.run_id) == (
        "get_location",
        "client",
        {"city": "a"},
        handle.run_id,
    )
    executor.submit_tool_result(handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": 1})
    assert open_ids(executor, handle.session_id) == ["c2"]
    executor.submit_tool_result(handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c2", "result": 2})
    assert handle.result().status == "completed"
    assert executor.list_pending_tool_calls(handle.session_id) == []


def test_parked_run_costs_nothing_and_resumes_on_submission(make_executor: ExecutorFactory) -> None:
    events: list[tuple[str, str, str | None]] = []
    hooks = AgentHooks(
        on_agent_suspended=lambda p: events.append(("suspended", p.run_id, p.previous_run_id)),
        on_agent_resumed=lambda p: events.append(("resumed", p.run_id, p.previous_run_id)),
    )
    agent = client_agent("parker", hooks=hooks)
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]),
        [agent],
        hot_window_seconds=0.3,
    )
    handle = executor.execute(agent, "where am I?")
    first = handle.result()
    assert first.status == "suspended_client_tool"
    assert first.suspended == {"tool_call_ids": ["c1"]}
    status = DBOS.get_workflow_status(handle.workflow_id)
    assert status is not None and status.status == "SUCCESS"  # the workflow ended: nothing is held
    assert executor.can_resume(handle.session_id).can_resume
    assert executor.list_runs(handle.session_id)[0].status == "suspended"

    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Paris"}
    )
    assert continued is not None and continued.run_id != handle.run_id
    result = continued.result()
    assert result.status == "completed" and result.output == Out(answer='"Paris"')
    runs = executor.list_runs(handle.session_id)
    assert [(r.turn, r.status, r.mode) for r in runs] == [(1, "suspended", "execute"), (2, "completed", "resume")]
    assert runs[1].previous_run_id == handle.run_id
    assert ("suspended", handle.run_id, None) in events
    assert ("resumed", continued.run_id, handle.run_id) in events  # previous_run_id = the suspended run
    assert find_unpaired_tool_call_ids(continued.get_state().messages) == []


def steps_of(workflow_id: str) -> list[str]:
    return [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]


def park_then_answer(make_executor: ExecutorFactory, agent: Any, answer: str) -> tuple[Any, Any, Any]:
    """Run ``agent`` with a zero hot window until it parks on ``c1``, then answer it.

    Returns the executor, the parked run's handle and the continuation's handle.
    """
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]),
        [agent],
        hot_window_seconds=0,
    )
    handle = executor.execute(agent, "where am I?")
    assert handle.result().status == "suspended_client_tool"
    parked = [(c.tool_call_id, c.delivery) for c in executor.list_pending_tool_calls(handle.session_id)]
    assert parked == [("c1", "parked")]
    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": answer}
    )
    assert continued is not None and continued.result().output == Out(answer=f'"{answer}"')
    return executor, handle, continued


def test_a_zero_hot_window_parks_in_the_registration(make_executor: ExecutorFactory) -> None:
    """``hot_window_seconds=0`` parks at once: the registration's own check flips the calls to
    ``parked``, so the run takes no ``DBOS.recv``, no timeout and no second check before it ends."""
    _, handle, _ = park_then_answer(make_executor, client_agent("zero-window"), "Rome")
    assert steps_of(handle.workflow_id) == ["zero-window.llm", "zero-window.hitl.register", "zero-window.finalize"]


@pytest.mark.parametrize("resumed_hook", [False, True])
def test_a_continuation_of_an_answered_batch_takes_no_registration(
    make_executor: ExecutorFactory, resumed_hook: bool
) -> None:
    """The continuation's first check already reads the answers that completed the batch: it goes
    on to the model without registering the calls again (and reading them a second time)."""
    resumed: list[str] = []
    hooks = AgentHooks(on_agent_resumed=lambda p: resumed.append(p.run_id)) if resumed_hook else None
    agent = client_agent(f"answered-batch-{resumed_hook}", hooks=hooks)
    executor, handle, continued = park_then_answer(make_executor, agent, "Kyiv")
    name = agent.name
    expected = [f"{name}.hitl.check", *([f"{name}.hitl.resumed"] if resumed_hook else []), f"{name}.llm"]
    assert steps_of(continued.workflow_id) == [*expected, f"{name}.finalize"]
    assert resumed == ([continued.run_id] if resumed_hook else [])
    assert executor.list_pending_tool_calls(handle.session_id) == []  # the answer was applied
    assert find_unpaired_tool_call_ids(continued.get_state().messages) == []


def test_a_continuation_recorded_before_checks_could_stand_in_registers(
    make_executor: ExecutorFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step sequence follows what the first check recorded: without ``replaces_registration``
    (as an older version recorded it) the continuation takes its ``hitl.register`` step."""
    from helix_dbos.runtime import hitl_capability

    current = hitl_capability.check_step

    def recorded_by_an_older_version(*args: Any, **kwargs: Any) -> Any:
        out = dict(current(*args, **kwargs))
        out.pop("replaces_registration", None)
        return out

    monkeypatch.setattr(hitl_capability, "check_step", recorded_by_an_older_version)
    _, _, continued = park_then_answer(make_executor, client_agent("older-continuation"), "Riga")
    assert steps_of(continued.workflow_id) == [
        "older-continuation.hitl.check",
        "older-continuation.hitl.register",
        "older-continuation.llm",
        "older-continuation.finalize",
    ]


def test_approve_runs_the_tool_with_the_original_input(make_executor: ExecutorFactory) -> None:
    tool = define_tool("delete_file", input_schema=CityIn, execute=delete_file, require_approval=True)
    agent = define_agent("approver", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[tool])
    executor = make_executor(
        MockLLMAdapter([calls(("d1", "delete_file", {"city": "a.txt"})), finish_with_results]), [agent]
    )
    deleted.clear()
    handle = executor.execute(agent, "delete a.txt")

    async def approval_chunk() -> Any:
        stream = await handle.stream()
        assert stream is not None
        async for chunk in stream:
            if chunk.type == "tool_approval_request":
                return chunk
        return None

    chunk = asyncio.run(approval_chunk())
    assert chunk.tool_call_id == "d1" and chunk.arguments == {"city": "a.txt"}
    assert deleted == []  # nothing runs before the decision
    executor.submit_tool_result(
        handle.session_id,
        {
            "kind": "approval-response",
            "tool_call_id": "d1",
            "approved": True,
            "arguments_digest": chunk.arguments_digest,
        },
    )
    assert handle.result().output == Out(answer='{"deleted":"a.txt"}')
    assert deleted == ["a.txt"]


def test_deny_never_runs_the_tool(make_executor: ExecutorFactory) -> None:
    tool = define_tool("delete_file", input_schema=CityIn, execute=delete_file, require_approval=True)
    agent = define_agent("denier", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[tool])
    executor = make_executor(
        MockLLMAdapter([calls(("d1", "delete_file", {"city": "b.txt"})), finish_with_results]), [agent]
    )
    deleted.clear()
    handle = executor.execute(agent, "delete b.txt")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["d1"])
    executor.submit_tool_result(
        handle.session_id, {"kind": "approval-response", "tool_call_id": "d1", "approved": False, "reason": "no"}
    )
    assert handle.result().output == Out(answer=NOT_APPROVED_MESSAGE)
    assert deleted == []


def test_approval_bound_to_the_arguments_shown(make_executor: ExecutorFactory) -> None:
    tool = define_tool("delete_file", input_schema=CityIn, execute=delete_file, require_approval=True)
    agent = define_agent("digest", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[tool])
    executor = make_executor(
        MockLLMAdapter([calls(("d1", "delete_file", {"city": "c.txt"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "delete c.txt")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["d1"])
    with pytest.raises(HelixError, match="different arguments"):
        executor.submit_tool_result(
            handle.session_id,
            {"kind": "approval-response", "tool_call_id": "d1", "approved": True, "arguments_digest": "0" * 64},
        )
    assert open_ids(executor, handle.session_id) == ["d1"]  # nothing was recorded
    executor.abort(handle.session_id, "test over")


@pytest.mark.parametrize(("predicate", "gated"), [(lambda i: i.city == "secret", True), (lambda i: False, False)])
def test_predicate_gate(make_executor: ExecutorFactory, predicate: Any, gated: bool) -> None:
    tool = define_tool("delete_file", input_schema=CityIn, execute=delete_file, require_approval=predicate)
    agent = define_agent("gated", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[tool])
    executor = make_executor(
        MockLLMAdapter([calls(("d1", "delete_file", {"city": "secret"})), finish_with_results]), [agent]
    )
    deleted.clear()
    handle = executor.execute(agent, "go")
    if gated:
        wait_for(lambda: open_ids(executor, handle.session_id) == ["d1"])
        assert deleted == []
        executor.submit_tool_result(
            handle.session_id, {"kind": "approval-response", "tool_call_id": "d1", "approved": True}
        )
    assert handle.result().status == "completed"
    assert deleted == ["secret"]
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)]
    assert "gated.approval_gate.delete_file" in steps  # the boolean is checkpointed


def test_raising_predicate_fails_closed(make_executor: ExecutorFactory) -> None:
    def broken(inp: CityIn) -> bool:
        raise RuntimeError("predicate bug")

    tool = define_tool("delete_file", input_schema=CityIn, execute=delete_file, require_approval=broken)
    agent = define_agent("closed", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[tool])
    executor = make_executor(
        MockLLMAdapter([calls(("d1", "delete_file", {"city": "x"})), finish_with_results]), [agent]
    )
    deleted.clear()
    handle = executor.execute(agent, "go")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["d1"])  # approval required
    assert deleted == []
    executor.abort(handle.session_id)


def test_duplicate_and_concurrent_submissions_exactly_one_wins(make_executor: ExecutorFactory) -> None:
    agent = client_agent("dupes")
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "go")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def submit(i: int) -> None:
        barrier.wait()
        try:
            executor.submit_tool_result(
                handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": f"answer-{i}"}
            )
            outcomes.append(f"ok-{i}")
        except ToolCallAlreadyAnsweredError:
            outcomes.append("rejected")

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o.startswith("ok")]
    assert len(winners) == 1 and outcomes.count("rejected") == 7
    result = handle.result()
    assert result.output == Out(answer=f'"answer-{winners[0][3:]}"')  # the winner's payload, applied once
    with pytest.raises(ToolCallAlreadyAnsweredError):  # a later, identical submission changes nothing
        executor.submit_tool_result(
            handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "x"}
        )


def test_unknown_ids_and_wrong_kinds_are_clear_errors(make_executor: ExecutorFactory) -> None:
    agent = client_agent("unknowns")
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    with pytest.raises(SessionNotFoundError):
        executor.submit_tool_result("no-such-session", {"kind": "client-tool-result", "tool_call_id": "c1"})
    handle = executor.execute(agent, "go")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    with pytest.raises(PendingToolCallNotFoundError):
        executor.submit_tool_result(handle.session_id, {"kind": "client-tool-result", "tool_call_id": "nope"})
    with pytest.raises(HelixError, match="submit a 'client-tool-result'"):
        executor.submit_tool_result(
            handle.session_id, {"kind": "approval-response", "tool_call_id": "c1", "approved": True}
        )
    with pytest.raises(HelixError, match="Invalid tool submission"):
        executor.submit_tool_result(handle.session_id, {"kind": "bogus", "tool_call_id": "c1"})
    executor.submit_tool_result(handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": 1})
    assert handle.result().status == "completed"


def test_deadline_expiry_appends_a_tool_error_and_continues(make_executor: ExecutorFactory) -> None:
    after: list[Any] = []
    slow = define_tool("get_location", input_schema=CityIn, execute="client", timeout_ms=300)
    agent = define_agent(
        "deadline",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[slow],
        hooks={"after_tool": after.append},
    )
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "go")
    result = handle.result()
    assert result.status == "completed"
    assert result.output is not None and "timed out waiting for the client after 300 ms" in result.output.answer
    assert [(p.tool_call_id, p.success) for p in after] == [("c1", False)]  # hooks fire on the timeout path
    assert executor.store.pending.get(handle.session_id)[0].status == "applied"


def test_submission_racing_the_end_of_the_hot_window_is_applied_exactly_once(make_executor: ExecutorFactory) -> None:
    """Park (the workflow's side) and submit (the client's side) race on the same rows many times:
    every answer must be seen by exactly one of them, never neither."""
    agent = client_agent("racer")
    executor = make_executor(MockLLMAdapter([]), [agent])
    store = executor.store
    for i in range(30):
        session_id = f"race-{i}-{time.time_ns()}"
        store.create_session(session_id, agent_type="racer", custom_state={}, now_ms=1)
        store.pending.register(
            [
                PendingToolCall(
                    session_id=session_id,
                    tool_call_id="c1",
                    run_id="r",
                    workflow_id="w",
                    tool_name="get_location",
                    kind="client",
                    arguments={},
                    arguments_digest="d",
                    created_at=1,
                )
            ]
        )
        barrier = threading.Barrier(2)
        seen: dict[str, Any] = {}

        def park(sid: str = session_id, barrier: threading.Barrier = barrier, seen: dict[str, Any] = seen) -> None:
            barrier.wait()
            seen["park"] = store.pending.park(sid, "r")

        def submit(sid: str = session_id, barrier: threading.Barrier = barrier, seen: dict[str, Any] = seen) -> None:
            barrier.wait()
            seen["submit"] = store.pending.submit(sid, "c1", {"kind": "client-tool-result", "tool_call_id": "c1"})

        threads = [threading.Thread(target=park), threading.Thread(target=submit)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        workflow_saw_answer = seen["park"][0].status == "answered"
        submitter_saw_parked = seen["submit"].delivery == "parked"
        assert workflow_saw_answer != submitter_saw_parked  # exactly one side owns the answer


def test_interrupt_then_resume(make_executor: ExecutorFactory) -> None:
    started = threading.Event()
    release = threading.Event()

    async def slow_tool_call(inp: LLMGenerateInput) -> ToolCallsStepResult:
        started.set()
        await asyncio.to_thread(release.wait, 10)
        return calls(("t1", "noop", {}))

    agent = define_agent(
        "interruptible",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[define_tool("noop", execute=lambda i, c: {"ok": True})],
    )
    executor = make_executor(MockLLMAdapter([slow_tool_call, finish_with_results]), [agent])
    handle = executor.execute(agent, "go")
    started.wait(10)
    assert executor.interrupt(handle.session_id, "user_requested") is True
    release.set()
    result = handle.result()
    assert result.status == "interrupted"
    state = handle.get_state()
    assert state.status == "interrupted"
    assert executor.can_resume(handle.session_id).can_resume
    resumed = executor.resume(agent, handle.session_id, "please continue")
    assert resumed.result().status == "completed"
    runs = executor.list_runs(handle.session_id)
    assert [(r.turn, r.status) for r in runs] == [(1, "interrupted"), (2, "completed")]
    assert runs[1].previous_run_id == runs[0].run_id
    assert [m.role for m in resumed.get_state().messages][-3:] == ["user", "assistant", "tool"]


def test_abort_a_waiting_run(make_executor: ExecutorFactory) -> None:
    agent = client_agent("abortable")
    executor = make_executor(MockLLMAdapter([calls(("c1", "get_location", {"city": "?"}))]), [agent])
    handle = executor.execute(agent, "go")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    started = time.monotonic()
    executor.abort(handle.session_id, "user cancelled")
    result = handle.result()
    assert time.monotonic() - started < 5  # woken, not left blocked for the hot window
    assert result.status == "failed" and result.error == "aborted: user cancelled"
    assert "CANCELLED" not in (executor.get_handle(handle.session_id).result().error or "")
    state = handle.get_state()
    assert state.status == "failed"
    assert not executor.can_resume(handle.session_id).can_resume
    with pytest.raises(AgentNotResumableError):
        executor.resume(agent, handle.session_id)
    with pytest.raises(ToolCallAlreadyAnsweredError):
        executor.submit_tool_result(handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1"})


def test_retry_from_latest_and_explicit_checkpoint(make_executor: ExecutorFactory) -> None:
    from helix_dbos.step_result import ErrorStepResult

    agent = define_agent(
        "retrier",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[define_tool("noop", execute=lambda i, c: {"ok": True})],
    )
    model = MockLLMAdapter(
        [
            calls(("t1", "noop", {})),
            ErrorStepResult(error=HelixError("provider down", code="provider_overloaded"), should_stop=True),
            finish_with_results,  # retry from the latest checkpoint
            finish_with_results,  # retry from the explicit checkpoint of step 0
        ]
    )
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    assert handle.result().status == "failed"
    first_messages = handle.get_state().messages
    retried = executor.retry(handle.session_id)
    assert retried.result().status == "completed"
    assert retried.get_state().messages[: len(first_messages)] == first_messages  # nothing lost before the failure

    geneses = [
        executor.store.get_checkpoint(c.id)
        for c in executor.store.list_checkpoints(handle.session_id).items
        if c.step_count == 0
    ]
    genesis = min((c for c in geneses if c is not None), key=lambda c: c.message_count)  # the first run's
    with pytest.raises(HelixError, match="does not exist"):
        executor.retry(handle.session_id, checkpoint_id="cpv1-nope-s1-t1-abc")
    again = executor.retry(handle.session_id, checkpoint_id=genesis.id)
    assert again.result().status == "completed"
    messages = again.get_state().messages
    assert [m.role for m in messages] == ["user", "assistant", "tool"]  # what followed step 0 was discarded
    assert [r.mode for r in executor.list_runs(handle.session_id)] == ["execute", "retry", "retry"]


def test_handle_methods_and_run_outcome(make_executor: ExecutorFactory) -> None:
    """The seeds' handle surface: outcome, can_resume, resume, abort, retry."""
    from helix_dbos import (
        AbortedOutcome,
        CompletedOutcome,
        FailedOutcome,
        ResumeOptions,
        RetryOptions,
        SuspendedClientToolOutcome,
    )
    from helix_dbos.step_result import ErrorStepResult

    agent = client_agent("handled")
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]),
        [agent],
        hot_window_seconds=0.2,
    )
    handle = executor.execute(agent, "go")
    parked = handle.outcome()
    assert isinstance(parked, SuspendedClientToolOutcome)
    assert parked.pending_client_tool_calls["c1"]["tool_name"] == "get_location"
    assert handle.can_resume().can_resume
    executor.store.pending.submit(
        handle.session_id, "c1", {"kind": "client-tool-result", "tool_call_id": "c1", "result": 7}
    )
    resumed = handle.resume(ResumeOptions())
    done = resumed.outcome()
    assert isinstance(done, CompletedOutcome) and done.output == Out(answer="7")
    assert done.final_state.status == "completed"

    executor.close()  # one runtime per process: the next executor replaces this one
    erring = define_agent("handled-2", system_prompt="x", llm_config="openai/fake", output_schema=Out)
    executor2 = make_executor(
        MockLLMAdapter([ErrorStepResult(error=HelixError("down"), should_stop=True), finish_with_results]), [erring]
    )
    failed = executor2.execute(erring, "go")
    assert isinstance(failed.outcome(), FailedOutcome)
    retried = failed.retry(RetryOptions())
    assert isinstance(retried.outcome(), CompletedOutcome)

    executor2.close()
    abortable = client_agent("handled-3")
    executor3 = make_executor(MockLLMAdapter([calls(("c1", "get_location", {"city": "?"}))]), [abortable])
    waiting = executor3.execute(abortable, "again")
    wait_for(lambda: open_ids(executor3, waiting.session_id) == ["c1"])
    waiting.abort("stop")
    outcome = waiting.outcome()
    assert isinstance(outcome, AbortedOutcome) and outcome.reason == "stop"


def test_an_idempotency_key_without_a_session_names_one_session(make_executor: ExecutorFactory) -> None:
    agent = define_agent("keyed", system_prompt="Answer.", llm_config="openai/fake")
    model = MockLLMAdapter([{"type": "text", "content": "hi", "should_stop": True, "stop_reason": "end_turn"}] * 2)
    executor = make_executor(model, [agent])
    first = executor.execute(agent, "hello", idempotency_key="order-42")
    again = executor.execute(agent, "hello", idempotency_key="order-42")
    assert (again.session_id, again.run_id) == (first.session_id, first.run_id)
    assert first.result().status == "completed"
    repeat = executor.execute(agent, "hello", idempotency_key="order-42")  # after it finished, too
    assert repeat.run_id == first.run_id and len(executor.list_runs(first.session_id)) == 1
    other = executor.execute(agent, "hello", idempotency_key="order-43")
    assert other.session_id != first.session_id
