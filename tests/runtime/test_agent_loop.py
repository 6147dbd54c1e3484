"""The agent loop as a DBOS workflow on PostgreSQL, driven by scripted models (seeds 000, 001, 003)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel, Field

from helix_dbos import (
    AgentAlreadyRunningError,
    AgentHooks,
    AgentInput,
    AssistantMessage,
    HelixError,
    LLMGenerateInput,
    MockLLMAdapter,
    SystemMessage,
    ToolCallRequest,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    define_agent,
    define_tool,
)
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.step_result import ErrorStepResult, ParsedToolCall, TextStepResult, ToolCallsStepResult
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class Out(BaseModel):
    answer: str


class Notes(BaseModel):
    notes: list[str] = Field(default_factory=list)
    last: str | None = None


class TextIn(BaseModel):
    text: str


def tool_calls(*calls: tuple[str, str, dict[str, Any]], content: str | None = None) -> ToolCallsStepResult:
    return ToolCallsStepResult(
        content=content,
        tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in calls],
        stop_reason="tool_use",
    )


def finish(answer: str, call_id: str = "f1") -> ToolCallsStepResult:
    return tool_calls((call_id, "__finish__", {"answer": answer}))


def add_note(inp: TextIn, ctx: ToolContext) -> dict[str, str]:
    ctx.update_state(lambda d: d.notes.append(inp.text))
    return {"added": inp.text}


def test_text_agent_completes_with_its_text(make_executor: ExecutorFactory) -> None:
    agent = define_agent("chat", system_prompt="Be brief.", llm_config="openai/fake")
    model = MockLLMAdapter([TextStepResult(content="Hello there.", should_stop=True, stop_reason="end_turn")])
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "Hi")
    result = handle.result()
    assert (result.status, result.output, result.error) == ("completed", "Hello there.", None)
    state = handle.get_state()
    assert state.status == "completed"
    assert state.messages == [UserMessage(content="Hi"), AssistantMessage(content="Hello there.")]
    (run,) = executor.list_runs(handle.session_id)
    assert (run.turn, run.status, run.step_count, run.run_id) == (1, "completed", 1, handle.run_id)
    # The model saw the system prompt first.
    assert model.inputs[0].messages[0].role == "system"


def test_tool_loop_then_finish_keeps_history_paired(make_executor: ExecutorFactory) -> None:
    agent = define_agent(
        "noter",
        system_prompt="Take notes.",
        llm_config="openai/fake",
        state_schema=Notes,
        output_schema=Out,
        tools=[define_tool("add_note", input_schema=TextIn, execute=add_note)],
    )
    model = MockLLMAdapter([tool_calls(("t1", "add_note", {"text": "a"})), finish("done")])
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "note a")
    result = handle.result()
    assert result.status == "completed"
    assert result.output == Out(answer="done")
    state = handle.get_state()
    assert state.custom_state == {"notes": ["a"], "last": None}
    assert find_unpaired_tool_call_ids(state.messages) == []
    assert state.messages[-1] == ToolResultMessage(
        tool_call_id="f1", tool_name="__finish__", content='{"acknowledged":true}'
    )
    # Step names are a persisted contract.
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)]
    assert steps == ["noter.llm", "noter.tool.add_note", "noter.llm", "noter.finalize"]


def test_parallel_tools_run_concurrently_and_appends_compose(make_executor: ExecutorFactory) -> None:
    # All three must be running at once to pass the barrier; one at a time, the first would wait
    # out the timeout and fail. This proves concurrency without a wall-clock bound, which a loaded
    # CI machine can miss. The later a call is, the sooner it finishes, so the finish order is
    # the reverse of the input order.
    together = threading.Barrier(3, timeout=30)

    def slow_note(inp: TextIn, ctx: ToolContext) -> dict[str, str]:
        together.wait()
        time.sleep(0.1 * (2 - int(inp.text)))
        ctx.update_state(lambda d: d.notes.append(inp.text))
        return {"added": inp.text}

    agent = define_agent(
        "parallel",
        system_prompt="x",
        llm_config="openai/fake",
        state_schema=Notes,
        output_schema=Out,
        tools=[define_tool("slow_note", input_schema=TextIn, execute=slow_note)],
    )
    model = MockLLMAdapter([tool_calls(*[(f"t{i}", "slow_note", {"text": str(i)}) for i in range(3)]), finish("ok")])
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    assert handle.result().status == "completed"
    assert not together.broken, "the three tools did not run at the same time"
    state = handle.get_state()
    assert sorted(state.custom_state["notes"]) == ["0", "1", "2"]  # every append survived the merge
    # Results are recorded in input order, whatever order the tools finished in.
    assert [m.tool_call_id for m in state.messages if isinstance(m, ToolResultMessage)][:3] == [
        "t0",
        "t1",
        "t2",
    ]


def test_finish_with_phase_order_first_wins_and_transform(make_executor: ExecutorFactory) -> None:
    seen: dict[str, Any] = {}
    executed: list[str] = []

    def submit(inp: TextIn, ctx: ToolContext) -> dict[str, str]:
        executed.append(f"submit:{inp.text}")
        seen["notes_at_submit"] = list(ctx.get_state().notes)
        return {"raw": inp.text}

    def reject(inp: TextIn, ctx: ToolContext) -> dict[str, str]:
        executed.append("reject")
        return {"raw": "rejected"}

    agent = define_agent(
        "finisher",
        system_prompt="x",
        llm_config="openai/fake",
        state_schema=Notes,
        output_schema=Out,
        tools=[
            define_tool("add_note", input_schema=TextIn, execute=add_note),
            define_tool(
                "submit",
                input_schema=TextIn,
                execute=submit,
                finish_with=True,
                finish_with_transform=lambda out: {"answer": out["raw"].upper()},
            ),
            define_tool("reject", input_schema=TextIn, execute=reject, finish_with=True),
        ],
    )
    model = MockLLMAdapter(
        [
            tool_calls(
                ("s", "submit", {"text": "yes"}),
                ("n", "add_note", {"text": "phase1"}),
                ("r", "reject", {"text": "no"}),
            )
        ]
    )
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    result = handle.result()
    assert result.status == "completed"
    assert result.output == Out(answer="YES")  # transformed output of the first finish_with tool
    assert seen["notes_at_submit"] == ["phase1"]  # phase 2 saw phase-1 state
    assert executed == ["submit:yes"]  # the later finish_with tool never ran
    state = handle.get_state()
    assert find_unpaired_tool_call_ids(state.messages) == []
    assert "__finish__" not in [t.name for t in model.inputs[0].tools]


def test_throwing_finish_with_reports_to_model_then_succeeds(make_executor: ExecutorFactory) -> None:
    def submit(inp: TextIn, ctx: ToolContext) -> dict[str, str]:
        if len(inp.text) < 10:
            raise ValueError("Data too short. Please provide more detail.")
        return {"answer": inp.text}

    agent = define_agent(
        "retrier",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[define_tool("submit", input_schema=TextIn, execute=submit, finish_with=True)],
    )
    model = MockLLMAdapter(
        [
            tool_calls(("a", "submit", {"text": "Hi"})),
            tool_calls(("b", "submit", {"text": "A longer and more detailed response"})),
        ]
    )
    executor = make_executor(model, [agent])
    result = executor.execute(agent, "go").result()
    assert result.status == "completed"
    assert result.output == Out(answer="A longer and more detailed response")
    second_input = model.inputs[1].messages
    error = next(m for m in second_input if isinstance(m, ToolResultMessage) and m.tool_call_id == "a")
    assert "Data too short" in error.content


def test_throwing_transform_fails_the_run(make_executor: ExecutorFactory) -> None:
    def bad_transform(out: Any) -> Any:
        raise ValueError("Invalid output")

    agent = define_agent(
        "transformer",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[
            define_tool(
                "submit",
                input_schema=TextIn,
                execute=lambda inp, ctx: {"x": 1},
                finish_with=True,
                finish_with_transform=bad_transform,
            )
        ],
    )
    executor = make_executor(MockLLMAdapter([tool_calls(("a", "submit", {"text": "x"}))]), [agent])
    handle = executor.execute(agent, "go")
    result = handle.result()
    assert result.status == "failed"
    assert result.error is not None and "Invalid output" in result.error
    assert handle.get_state().status == "failed"


def test_invalid_and_unknown_tool_calls_become_tool_errors(make_executor: ExecutorFactory) -> None:
    agent = define_agent(
        "validator",
        system_prompt="x",
        llm_config="openai/fake",
        state_schema=Notes,
        output_schema=Out,
        tools=[define_tool("add_note", input_schema=TextIn, execute=add_note)],
    )
    model = MockLLMAdapter(
        [
            tool_calls(("bad", "add_note", {"txt": 1}), ("ghost", "no_such_tool", {})),
            finish("recovered"),
        ]
    )
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    assert handle.result().output == Out(answer="recovered")
    results = {m.tool_call_id: m for m in handle.get_state().messages if isinstance(m, ToolResultMessage)}
    assert "Invalid arguments for tool 'add_note'" in results["bad"].content
    assert "Unknown tool 'no_such_tool'" in results["ghost"].content
    assert results["bad"].metadata == {"is_error": True}


def test_invalid_finish_arguments_get_a_second_chance(make_executor: ExecutorFactory) -> None:
    agent = define_agent("strict-out", system_prompt="x", llm_config="openai/fake", output_schema=Out)
    model = MockLLMAdapter([tool_calls(("f1", "__finish__", {"wrong": 1})), finish("fixed", "f2")])
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    assert handle.result().output == Out(answer="fixed")
    messages = handle.get_state().messages
    assert find_unpaired_tool_call_ids(messages) == []
    first = next(m for m in messages if isinstance(m, ToolResultMessage) and m.tool_call_id == "f1")
    assert "does not match the required schema" in first.content


def test_hooks_fire_in_canonical_order(make_executor: ExecutorFactory) -> None:
    events: list[str] = []
    lock = threading.Lock()

    def record(name: str) -> Any:
        def hook(payload: Any) -> None:
            message = getattr(payload, "message", None)
            key = getattr(payload, "tool_call_id", None) or getattr(message, "tool_call_id", None)
            key = key or getattr(message, "role", "") or str(getattr(payload, "step", ""))
            with lock:
                events.append(f"{name}:{key}")

        return hook

    llm_payloads: list[Any] = []
    hooks = AgentHooks(
        on_agent_start=record("on_agent_start"),
        before_llm_call=record("before_llm_call"),
        after_llm_call=lambda p: (llm_payloads.append(p), record("after_llm_call")(p)),
        before_tool=record("before_tool"),
        on_state_change=record("on_state_change"),
        on_message=record("on_message"),
        after_tool=record("after_tool"),
        on_agent_complete=record("on_agent_complete"),
    )
    agent = define_agent(
        "hooked",
        system_prompt="x",
        llm_config="openai/fake",
        state_schema=Notes,
        output_schema=Out,
        tools=[define_tool("add_note", input_schema=TextIn, execute=add_note)],
        hooks=hooks,
    )
    model = MockLLMAdapter([tool_calls(("t1", "add_note", {"text": "a"})), finish("done")])
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    assert handle.result().status == "completed"
    assert events == [
        "on_agent_start:",
        "before_llm_call:1",
        "after_llm_call:1",
        "before_tool:t1",
        "on_state_change:t1",
        "on_message:assistant",
        "on_message:t1",
        "after_tool:t1",
        "before_llm_call:2",
        "after_llm_call:2",
        "on_message:assistant",
        "on_message:f1",
        "on_agent_complete:",
    ]
    # The model-call hooks see what the model was sent and what it answered.
    first, second = llm_payloads
    assert (first.session_id, first.run_id, first.agent_type) == (handle.session_id, handle.run_id, "hooked")
    assert first.messages[0].role == "system" and first.messages[-1].content == "go"
    assert first.tool_names == ["add_note", "__finish__"]
    assert first.step_result.tool_calls[0].id == "t1" and first.duration_ms >= 0
    assert second.step_result.tool_calls[0].name == "__finish__"


def test_on_agent_complete_fires_for_finish_with(make_executor: ExecutorFactory) -> None:
    completed: list[Any] = []
    agent = define_agent(
        "fw-hook",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[define_tool("submit", input_schema=Out, execute=lambda i, c: i, finish_with=True)],
        hooks={"on_agent_complete": completed.append},
    )
    executor = make_executor(MockLLMAdapter([tool_calls(("s", "submit", {"answer": "x"}))]), [agent])
    assert executor.execute(agent, "go").result().status == "completed"
    assert [(p.status, p.output) for p in completed] == [("completed", {"answer": "x"})]


def test_continuation_sees_prior_conversation_and_heals_legacy_finish(make_executor: ExecutorFactory) -> None:
    agent = define_agent("cont", system_prompt="x", llm_config="openai/fake", output_schema=Out)
    model = MockLLMAdapter([finish("first"), finish("second", "f2")])
    executor = make_executor(model, [agent])
    first = executor.execute(agent, "one")
    assert first.result().output == Out(answer="first")
    second = executor.execute(agent, "two", session_id=first.session_id)
    assert second.session_id == first.session_id and second.run_id != first.run_id
    assert second.result().output == Out(answer="second")
    seen = [m for m in model.inputs[1].messages if m.role != "system"]
    assert [m.role for m in seen] == ["user", "assistant", "tool", "user"]
    runs = executor.list_runs(first.session_id)
    assert [(r.turn, r.status) for r in runs] == [(1, "completed"), (2, "completed")]


def test_legacy_dangling_finish_is_healed_on_reopen(make_executor: ExecutorFactory, runtime_db: str) -> None:
    agent = define_agent("legacy", system_prompt="x", llm_config="openai/fake", output_schema=Out)
    model = MockLLMAdapter([finish("new", "f2")])
    executor = make_executor(model, [agent])
    # Simulate a session completed before the eager heal existed: a __finish__ call with no result.
    from helix_dbos.store.base import StartRun, StepCommit

    store = executor.store
    store.start_run(
        StartRun(
            session_id="legacy-1",
            run_id="legacy-1-turn-1",
            workflow_id="legacy-1-turn-1",
            agent_type="legacy",
            new_session_state={},
            input_messages=[UserMessage(content="old")],
            now_ms=1,
        )
    )
    store.commit_step(
        StepCommit(
            session_id="legacy-1",
            run_id="legacy-1-turn-1",
            step_count=1,
            first_sequence=1,
            messages=[
                AssistantMessage(
                    tool_calls=[ToolCallRequest(id="old-f", name="__finish__", arguments={"answer": "old"})]
                )
            ],
            custom_state={},
            session_status="completed",
            run_status="completed",
            output={"answer": "old"},
            now_ms=2,
        )
    )
    handle = executor.execute(agent, "again", session_id="legacy-1")
    assert handle.result().output == Out(answer="new")
    sent = model.inputs[0].messages
    assert any(isinstance(m, ToolResultMessage) and m.tool_call_id == "old-f" for m in sent)
    assert find_unpaired_tool_call_ids(handle.get_state().messages) == []


def test_a_system_message_in_the_input_history_reaches_the_model(make_executor: ExecutorFactory) -> None:
    agent = define_agent("sys-history", system_prompt="Be brief.", llm_config="openai/fake")
    model = MockLLMAdapter([TextStepResult(content="ok", should_stop=True, stop_reason="end_turn")])
    executor = make_executor(model, [agent])
    history = [UserMessage(content="hi"), SystemMessage(content="Answer in French.")]
    handle = executor.execute(agent, AgentInput(message="again", messages=history), session_id="sys-history-1")
    assert handle.result().status == "completed"
    sent = model.inputs[0].messages
    assert sent[0] == SystemMessage(content="Be brief.")
    assert SystemMessage(content="Answer in French.") in sent[1:]


def test_running_session_rejects_a_new_turn_but_dedupes_the_same_request(
    make_executor: ExecutorFactory,
) -> None:
    release = threading.Event()

    async def slow(inp: LLMGenerateInput) -> TextStepResult:
        import asyncio

        await asyncio.to_thread(release.wait, 10)
        return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")

    agent = define_agent("busy", system_prompt="x", llm_config="openai/fake")
    executor = make_executor(MockLLMAdapter([slow]), [agent])
    first = executor.execute(agent, "hello", session_id="busy-1")
    again = executor.execute(agent, "hello", session_id="busy-1")
    assert again.run_id == first.run_id
    with pytest.raises(AgentAlreadyRunningError):
        executor.execute(agent, "something else", session_id="busy-1")
    release.set()
    assert first.result().status == "completed"
    assert len(executor.list_runs("busy-1")) == 1


def test_max_steps_ends_a_structured_agent_as_failed(make_executor: ExecutorFactory) -> None:
    agent = define_agent(
        "looper",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        max_steps=3,
        tools=[define_tool("noop", execute=lambda i, c: {"ok": True})],
    )
    model = MockLLMAdapter([tool_calls((f"t{i}", "noop", {})) for i in range(3)])
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")
    result = handle.result()
    assert result.status == "failed"
    assert result.error is not None and "without calling __finish__" in result.error
    assert model.call_count == 3
    assert find_unpaired_tool_call_ids(handle.get_state().messages) == []


def test_max_tokens_recovery_nudges_structured_agent(make_executor: ExecutorFactory) -> None:
    agent = define_agent("long", system_prompt="x", llm_config="openai/fake", output_schema=Out)
    model = MockLLMAdapter(
        [
            TextStepResult(content="A very long essay", should_stop=True, stop_reason="max_tokens"),
            finish("short"),
        ]
    )
    executor = make_executor(model, [agent])
    assert executor.execute(agent, "go").result().output == Out(answer="short")
    nudge = model.inputs[1].messages[-1]
    assert isinstance(nudge, UserMessage) and "maximum output length" in nudge.content


def test_provider_error_fails_the_run(make_executor: ExecutorFactory) -> None:
    agent = define_agent("erring", system_prompt="x", llm_config="openai/fake")
    error = HelixError("Rate limited", code="provider_rate_limited")
    executor = make_executor(MockLLMAdapter([ErrorStepResult(error=error, should_stop=True)]), [agent])
    handle = executor.execute(agent, "go")
    result = handle.result()
    assert (result.status, result.error) == ("failed", "Rate limited")
    assert handle.get_state().status == "failed"


def test_usage_and_checkpoints_are_recorded_per_step(make_executor: ExecutorFactory) -> None:
    from helix_dbos.step_result import TokenUsage

    agent = define_agent(
        "counted",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[define_tool("noop", execute=lambda i, c: {"ok": True})],
    )
    step1 = tool_calls(("t", "noop", {})).model_copy(update={"usage": TokenUsage(input_tokens=10, output_tokens=3)})
    step2 = finish("ok").model_copy(
        update={"usage": TokenUsage(input_tokens=20, output_tokens=4, cached_input_tokens=5)}
    )
    executor = make_executor(MockLLMAdapter([step1, step2]), [agent])
    handle = executor.execute(agent, "go")
    handle.result()
    usage = executor.store.get_usage(handle.session_id)
    llm = [u for u in usage if u.kind == "llm"]
    assert [(u.step, u.input_tokens, u.output_tokens, u.cached_input_tokens) for u in llm] == [
        (1, 10, 3, 0),
        (2, 20, 4, 5),
    ]
    assert [u.name for u in usage if u.kind == "tool"] == ["noop"]
    checkpoints = executor.store.list_checkpoints(handle.session_id)
    # Step 0 is the run's genesis checkpoint (what retry-from-the-start restores), then one per step.
    assert sorted(c.step_count for c in checkpoints.items) == [0, 1, 2]
    assert all(c.id.startswith(f"cpv1-{handle.session_id}-s") for c in checkpoints.items)


def test_stream_carries_tool_and_text_chunks(make_executor: ExecutorFactory) -> None:
    import asyncio

    agent = define_agent(
        "streamer",
        system_prompt="x",
        llm_config="openai/fake",
        state_schema=Notes,
        tools=[define_tool("add_note", input_schema=TextIn, execute=add_note)],
    )
    model = MockLLMAdapter(
        [
            tool_calls(("t1", "add_note", {"text": "a"})),
            TextStepResult(content="all done", should_stop=True, stop_reason="end_turn"),
        ]
    )
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "go")

    async def collect() -> list[Any]:
        stream = await handle.stream()
        assert stream is not None
        return [chunk async for chunk in stream]

    chunks = asyncio.run(collect())
    types = [c.type for c in chunks]
    assert types.index("tool_start") < types.index("state_patch") < types.index("tool_end")
    assert "".join(c.content for c in chunks if c.type == "text_delta") == "all done"
    assert types[-1] == "output"


def test_per_call_hooks_fire_after_agent_hooks(make_executor: ExecutorFactory) -> None:
    order: list[str] = []
    agent = define_agent(
        "per-call",
        system_prompt="x",
        llm_config="openai/fake",
        hooks={"on_agent_complete": lambda p: order.append("agent")},
    )
    executor = make_executor(
        MockLLMAdapter([TextStepResult(content="hi", should_stop=True, stop_reason="end_turn")]), [agent]
    )
    handle = executor.execute(agent, "go", hooks=AgentHooks(on_agent_complete=lambda p: order.append("call")))
    assert handle.result().status == "completed"
    assert order == ["agent", "call"]


def test_continuing_with_a_changed_definition_logs_a_warning(make_executor: ExecutorFactory) -> None:
    warnings: list[tuple[str, Any]] = []

    class Recorder:
        def debug(self, message: str, data: Any = None) -> None: ...
        def info(self, message: str, data: Any = None) -> None: ...
        def warn(self, message: str, data: Any = None) -> None:
            warnings.append((message, data))

        def error(self, message: str, data: Any = None) -> None: ...

    reply = TextStepResult(content="ok", should_stop=True, stop_reason="end_turn")
    v1 = define_agent("evolving", system_prompt="Version one.", llm_config="openai/fake")
    executor = make_executor(MockLLMAdapter([reply, reply]), [v1], logger=Recorder())
    first = executor.execute(v1, "one")
    first.result()
    v2 = define_agent("evolving", system_prompt="Version two.", llm_config="openai/fake")
    second = executor.execute(v2, "two", session_id=first.session_id)
    assert second.result().status == "completed"
    assert any("agent definition changed" in message for message, _ in warnings)
