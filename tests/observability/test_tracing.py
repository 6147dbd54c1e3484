"""OpenTelemetry spans of real runs on PostgreSQL, read with the SDK's in-memory exporter.

One trace per session (its id derived from the session id), run -> step -> chat / execute_tool /
HITL wait spans with the GenAI semantic conventions, and suspend/resume linked by
``helix.previous_run_id``. The crash case (a SIGKILLed worker) is in ``test_crash_observed.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from helix_dbos import LLMGenerateInput, MockLLMAdapter, ToolResultMessage, define_agent, define_tool
from helix_dbos.observability import session_trace_id
from helix_dbos.observability.run_observer import NOOP, RunInfo, current, observe_run
from helix_dbos.observability.tracing import session_context, session_span_id
from helix_dbos.step_result import ParsedToolCall, TextStepResult, TokenUsage, ToolCallsStepResult
from tests.observability.spans import span_record, tree
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class CityIn(BaseModel):
    city: str


class Out(BaseModel):
    answer: str


def calls(*items: tuple[str, str, dict[str, Any]], tokens: tuple[int, int] = (100, 20)) -> ToolCallsStepResult:
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in items],
        stop_reason="tool_use",
        usage=TokenUsage(input_tokens=tokens[0], output_tokens=tokens[1], cached_input_tokens=7),
    )


def text(content: str) -> TextStepResult:
    return TextStepResult(
        content=content, should_stop=True, stop_reason="end_turn", usage=TokenUsage(input_tokens=150, output_tokens=5)
    )


def finish_with_results(inp: LLMGenerateInput) -> ToolCallsStepResult:
    seen = [m.content for m in inp.messages if isinstance(m, ToolResultMessage)]
    return calls(("fin", "__finish__", {"answer": " | ".join(seen)}))


def weather(inp: CityIn, ctx: object) -> dict[str, Any]:
    if inp.city == "Atlantis":
        raise ValueError("no such city")
    return {"city": inp.city, "temp": 20}


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def records(spans: InMemorySpanExporter, session_id: str) -> list[dict[str, Any]]:
    return [r for r in map(span_record, spans.get_finished_spans()) if r["trace_id"] == session_trace_id(session_id)]


def by_name(found: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return sorted((r for r in found if r["name"].startswith(prefix)), key=lambda r: r["start"])


def test_a_run_with_tool_calls_is_one_span_tree(make_executor: ExecutorFactory, spans: InMemorySpanExporter) -> None:
    tool = define_tool("get_weather", input_schema=CityIn, execute=weather)
    agent = define_agent("weather", system_prompt="w", llm_config="openai/gpt-4o-mini", tools=[tool])
    model = MockLLMAdapter(
        [
            calls(("t1", "get_weather", {"city": "Paris"}), ("t2", "get_weather", {"city": "Atlantis"})),
            text("Paris is sunny."),
            text("Still sunny."),
        ]
    )
    executor = make_executor(model, [agent])
    handle = executor.execute(agent, "Weather in Paris and Atlantis?")
    assert handle.result().status == "completed"
    found = records(spans, handle.session_id)
    shown = tree(found)

    (run,) = by_name(found, "invoke_agent")
    assert run["parent_id"] == session_span_id(handle.session_id), shown  # the session's root context
    assert run["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert run["attributes"]["gen_ai.agent.name"] == "weather"
    assert run["attributes"]["gen_ai.conversation.id"] == handle.session_id
    assert run["attributes"]["helix.run_id"] == handle.run_id
    assert run["attributes"]["helix.session_id"] == handle.session_id
    assert run["attributes"]["helix.status"] == "completed"
    assert run["attributes"]["helix.recovered"] is False

    steps = by_name(found, "step ")
    assert [s["attributes"]["helix.step"] for s in steps] == [1, 2], shown
    assert all(s["parent_id"] == run["span_id"] for s in steps)
    chats = by_name(found, "chat ")
    assert [c["parent_id"] for c in chats] == [s["span_id"] for s in steps]
    first = chats[0]["attributes"]
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "openai/gpt-4o-mini"
    assert first["gen_ai.provider.name"] == "openai"
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (100, 20)
    assert first["gen_ai.usage.cache_read.input_tokens"] == 7
    assert first["helix.usage.reasoning_tokens"] == 0
    assert first["gen_ai.response.finish_reasons"] == ("tool_use",)

    tools = {t["attributes"]["gen_ai.tool.call.id"]: t for t in by_name(found, "execute_tool")}
    assert set(tools) == {"t1", "t2"}
    assert all(t["parent_id"] == steps[0]["span_id"] for t in tools.values())
    assert tools["t1"]["attributes"]["gen_ai.tool.name"] == "get_weather"
    assert tools["t1"]["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert (tools["t1"]["status"], tools["t2"]["status"]) == ("UNSET", "ERROR")  # the failing tool is marked

    # The next turn of the session is a second run in the same trace.
    second = executor.execute(agent, "And now?", session_id=handle.session_id)
    assert second.result().status == "completed"
    runs = by_name(records(spans, handle.session_id), "invoke_agent")
    assert [r["attributes"]["helix.turn"] for r in runs] == [1, 2]
    assert {r["parent_id"] for r in runs} == {session_span_id(handle.session_id)}
    assert runs[1]["attributes"]["helix.previous_run_id"] == handle.run_id


location = define_tool("get_location", description="Ask the browser", input_schema=CityIn, execute="client")


def test_a_hot_hitl_wait_is_a_span_of_its_step(make_executor: ExecutorFactory, spans: InMemorySpanExporter) -> None:
    agent = define_agent("asker", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location])
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "where am I?")
    wait_for(lambda: [c.tool_call_id for c in executor.list_pending_tool_calls(handle.session_id)] == ["c1"])
    time.sleep(0.2)
    executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Lyon"}
    )
    assert handle.result().status == "completed"
    found = records(spans, handle.session_id)
    (wait,) = by_name(found, "helix.hitl.wait")
    (step1,) = [s for s in by_name(found, "step ") if s["attributes"]["helix.step"] == 1]
    assert wait["parent_id"] == step1["span_id"], tree(found)
    assert wait["attributes"]["helix.hitl.outcome"] == "resolved"
    assert wait["attributes"]["gen_ai.tool.call.id"] == "c1"
    assert len(by_name(found, "invoke_agent")) == 1  # a hot wake continues the same run


def test_suspend_and_resume_are_linked_in_one_trace(
    make_executor: ExecutorFactory, spans: InMemorySpanExporter
) -> None:
    removed: list[str] = []
    tool = define_tool(
        "delete_file",
        input_schema=CityIn,
        execute=lambda i, c: removed.append(i.city) or {"ok": 1},
        require_approval=True,
    )
    agent = define_agent("janitor", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[tool])
    executor = make_executor(
        MockLLMAdapter([calls(("d1", "delete_file", {"city": "/etc/x"})), finish_with_results]),
        [agent],
        hot_window_seconds=0.3,
    )
    handle = executor.execute(agent, "delete it")
    assert handle.result().status == "suspended_client_tool"
    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "approval-response", "tool_call_id": "d1", "approved": True}
    )
    assert continued is not None and continued.result().status == "completed"
    assert removed == ["/etc/x"]

    found = records(spans, handle.session_id)
    shown = tree(found)
    suspended, resumed = by_name(found, "invoke_agent")
    assert suspended["attributes"]["helix.status"] == "suspended_client_tool", shown
    assert "helix.suspended" in suspended["events"]
    # The first run waited and parked; the continuation's check found the answer there at once.
    waits = by_name(found, "helix.hitl.wait")
    assert [w["attributes"]["helix.hitl.outcome"] for w in waits] == ["parked", "resolved"], shown
    assert [w["attributes"]["helix.run_id"] for w in waits] == [handle.run_id, continued.run_id]
    assert resumed["attributes"]["helix.run_id"] == continued.run_id
    assert resumed["attributes"]["helix.previous_run_id"] == handle.run_id  # the link
    assert resumed["attributes"]["helix.mode"] == "resume"
    assert "helix.resumed" in resumed["events"]
    # The approved call runs in the continuation, before its first model call: under its run span.
    (approved,) = by_name(found, "execute_tool delete_file")
    assert approved["parent_id"] == resumed["span_id"], shown


def test_session_trace_ids_are_deterministic_and_distinct() -> None:
    assert session_trace_id("s-1") == session_trace_id("s-1") != session_trace_id("s-2")
    ctx = session_context("s-1")
    from opentelemetry import trace

    span_context = trace.get_current_span(ctx).get_span_context()
    assert (span_context.trace_id, span_context.span_id) == (session_trace_id("s-1"), session_span_id("s-1"))
    assert span_context.is_remote and span_context.trace_flags.sampled


def test_with_no_provider_and_no_log_level_a_run_is_not_observed(caplog: pytest.LogCaptureFixture) -> None:
    """No tracer provider and the lifecycle logger off: the run gets the no-op observer."""
    caplog.set_level("WARNING", logger="helix_dbos.lifecycle")
    info = RunInfo("s", "r", "a", "m", 1, "execute")
    with observe_run(info) as observer:
        assert observer is NOOP and current() is NOOP
    with observe_run(info) as observer:  # in a thread of its own, too
        seen: list[object] = []
        thread = threading.Thread(target=lambda: seen.append(current()))
        thread.start()
        thread.join()
        assert seen == [NOOP]
