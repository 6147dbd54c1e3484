"""Every example of seed 000 (step processing), with the seed's expected values."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from helix_dbos import AssistantMessage, HelixError, SystemMessage, ToolCallRequest, ToolResultMessage, UserMessage
from helix_dbos.orchestration.message_builder import (
    AssistantMessagePlan,
    build_messages_for_llm,
    create_assistant_message,
    create_sub_agent_result_message,
    create_tool_result_message,
    find_unpaired_finish_call_id,
    heal_unpaired_finish,
    synthesize_finish_tool_result,
)
from helix_dbos.orchestration.step_processor import plan_step_processing
from helix_dbos.orchestration.stop_checker import StopConfig, determine_final_status, should_stop_execution
from helix_dbos.step_result import (
    ErrorStepResult,
    ParsedSubAgentCall,
    ParsedToolCall,
    StructuredOutputStepResult,
    TextStepResult,
    ToolCallsStepResult,
    is_error_stop_reason,
    is_recoverable_error_stop_reason,
)
from helix_dbos.tool import FINISH_TOOL_NAME


class ResultOut(BaseModel):
    result: str


# --- planStepProcessing ------------------------------------------------------------------------


def test_text_response() -> None:
    plan = plan_step_processing(TextStepResult(content="Hello!", should_stop=False))
    assert plan.assistant_message_plan == AssistantMessagePlan(content="Hello!", tool_calls=[])
    assert plan.pending_tool_calls == []
    assert plan.pending_sub_agent_calls == []
    assert plan.status_update is None
    assert plan.is_terminal is False


def test_tool_calls() -> None:
    step = ToolCallsStepResult(
        tool_calls=[
            ParsedToolCall(id="tc1", name="search", arguments={"query": "test"}),
            ParsedToolCall(id="tc2", name="fetch", arguments={"url": "https://..."}),
        ],
        sub_agent_calls=[],
    )
    plan = plan_step_processing(step)
    assert plan.assistant_message_plan is not None
    assert [c.id for c in plan.assistant_message_plan.tool_calls] == ["tc1", "tc2"]
    assert [(c.id, c.name) for c in plan.pending_tool_calls] == [("tc1", "search"), ("tc2", "fetch")]
    assert plan.pending_sub_agent_calls == []
    assert plan.status_update is None
    assert plan.is_terminal is False


def test_finish_tool_call() -> None:
    step = ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id="tc1", name="__finish__", arguments={"result": "done"})],
        sub_agent_calls=[],
    )
    plan = plan_step_processing(step, output_schema=ResultOut)
    assert plan.assistant_message_plan is not None
    assert [c.name for c in plan.assistant_message_plan.tool_calls] == ["__finish__"]  # in history
    assert plan.pending_tool_calls == []  # __finish__ is not executed
    assert plan.pending_sub_agent_calls == []
    assert plan.status_update is not None
    assert plan.status_update.status == "completed"
    assert plan.status_update.output == {"result": "done"}
    assert plan.is_terminal is True
    assert plan.output == {"result": "done"}
    assert plan.finish_tool_call_id == "tc1"


def test_finish_committed_history_is_paired() -> None:
    """The seed's committed history: the assistant __finish__ call, then the synthetic result."""
    step = ToolCallsStepResult(tool_calls=[ParsedToolCall(id="tc1", name="__finish__", arguments={"result": "done"})])
    plan = plan_step_processing(step, output_schema=ResultOut)
    assert plan.assistant_message_plan is not None and plan.finish_tool_call_id is not None
    history = [
        create_assistant_message(plan.assistant_message_plan),
        synthesize_finish_tool_result(plan.finish_tool_call_id),
    ]
    dumped = [m.model_dump(mode="json", exclude_none=True) for m in history]
    assert dumped == [
        {
            "role": "assistant",
            "tool_calls": [{"id": "tc1", "name": "__finish__", "arguments": {"result": "done"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "tc1",
            "tool_name": "__finish__",
            "content": '{"acknowledged":true}',
        },
    ]
    assert find_unpaired_finish_call_id(history) is None


def test_structured_output() -> None:
    plan = plan_step_processing(StructuredOutputStepResult(output={"result": "done"}))
    assert plan.assistant_message_plan is None
    assert plan.pending_tool_calls == []
    assert plan.pending_sub_agent_calls == []
    assert plan.status_update is not None
    assert (plan.status_update.status, plan.status_update.output) == ("completed", {"result": "done"})
    assert plan.is_terminal is True
    assert plan.output == {"result": "done"}


def test_error() -> None:
    plan = plan_step_processing(ErrorStepResult(error=Exception("Rate limited"), should_stop=True))
    assert plan.assistant_message_plan is None
    assert plan.pending_tool_calls == []
    assert plan.status_update is not None
    assert (plan.status_update.status, plan.status_update.error) == ("failed", "Rate limited")
    assert plan.is_terminal is True


def test_error_that_does_not_stop_is_not_terminal() -> None:
    plan = plan_step_processing(ErrorStepResult(error=HelixError("blip"), should_stop=False))
    assert plan.status_update is None
    assert plan.is_terminal is False


# --- the seed's "Testing" section ------------------------------------------------------------


def test_detects_finish_tool() -> None:
    plan = plan_step_processing(
        ToolCallsStepResult(tool_calls=[ParsedToolCall(id="t1", name="__finish__", arguments={"done": True})])
    )
    assert plan.is_terminal is True
    assert len(plan.pending_tool_calls) == 0
    assert plan.output == {"done": True}


def test_excludes_finish_from_pending_tools() -> None:
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[
                ParsedToolCall(id="t1", name="search", arguments={}),
                ParsedToolCall(id="t2", name="__finish__", arguments={}),
            ]
        )
    )
    assert len(plan.pending_tool_calls) == 0
    # The sibling never runs, so the runtime must still answer it to keep the history invariant.
    assert [c.id for c in plan.skipped_tool_calls] == ["t1"]


def test_invalid_finish_arguments_continue_with_a_validation_error() -> None:
    plan = plan_step_processing(
        ToolCallsStepResult(tool_calls=[ParsedToolCall(id="t1", name="__finish__", arguments={"result": 3})]),
        output_schema=ResultOut,
    )
    assert plan.is_terminal is False
    assert plan.status_update is None
    assert plan.finish_tool_call_id == "t1"
    assert plan.output_validation_error is not None and "result" in plan.output_validation_error


def test_finish_output_wrapped_for_non_object_schema() -> None:
    plan = plan_step_processing(
        ToolCallsStepResult(tool_calls=[ParsedToolCall(id="t1", name="__finish__", arguments={"value": ["a", "b"]})]),
        output_schema=list[str],
    )
    assert plan.output == ["a", "b"]


def test_string_tool_arguments_are_parsed_and_junk_coerced() -> None:
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[
                ParsedToolCall(id="a", name="x", arguments='{"q": 1}'),
                ParsedToolCall(id="b", name="y", arguments="[1, 2]"),
                ParsedToolCall(id="c", name="z", arguments='{"broken":'),
            ]
        )
    )
    assert [c.arguments for c in plan.pending_tool_calls] == [{"q": 1}, {}, {}]


# --- stop conditions ---------------------------------------------------------------------------


def test_should_stop_priority_order() -> None:
    config = StopConfig(max_steps=10)
    assert should_stop_execution(StructuredOutputStepResult(output={}), 1, config) is True
    assert should_stop_execution(ErrorStepResult(error=HelixError("x"), should_stop=True), 1, config) is True
    assert should_stop_execution(ErrorStepResult(error=HelixError("x"), should_stop=False), 1, config) is False
    assert should_stop_execution(TextStepResult(content="hi", should_stop=True), 1, config) is True
    assert should_stop_execution(TextStepResult(content="hi", should_stop=False), 1, config) is False
    assert should_stop_execution(TextStepResult(content="hi"), 10, config) is True
    tool_step = ToolCallsStepResult(tool_calls=[ParsedToolCall(id="1", name="t", arguments={})])
    assert should_stop_execution(tool_step, 9, config) is False


def test_should_stop_seed_example_with_stop_when() -> None:
    config = StopConfig(max_steps=10, stop_when=lambda r: isinstance(r, TextStepResult) and "DONE" in r.content)
    assert should_stop_execution(TextStepResult(content="all DONE"), 1, config) is True
    assert should_stop_execution(TextStepResult(content="working"), 1, config) is False


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("max_tokens", "failed"),
        ("content_filter", "failed"),
        ("refusal", "failed"),
        ("error", "failed"),
        ("end_turn", "completed"),
        ("stop_sequence", "completed"),
        ("tool_use", "completed"),
    ],
)
def test_determine_final_status(stop_reason: str, expected: str) -> None:
    step = TextStepResult.model_validate({"content": "x", "should_stop": True, "stop_reason": stop_reason})
    assert determine_final_status(step) == expected


def test_error_step_final_status_is_failed() -> None:
    assert determine_final_status(ErrorStepResult(error=HelixError("x"))) == "failed"


def test_error_stop_reason_classification() -> None:
    errors = {"max_tokens", "content_filter", "refusal", "error", "unknown"}
    for reason in ("end_turn", "stop_sequence", "tool_use", *errors):
        assert is_error_stop_reason(reason) is (reason in errors)  # type: ignore[arg-type]
        assert is_recoverable_error_stop_reason(reason) is (reason == "max_tokens")  # type: ignore[arg-type]


# --- message building --------------------------------------------------------------------------


def test_create_assistant_message_prefixes_sub_agent_calls() -> None:
    message = create_assistant_message(
        AssistantMessagePlan(
            tool_calls=[ParsedToolCall(id="t1", name="search", arguments={})],
            sub_agent_calls=[ParsedSubAgentCall(id="s1", agent_type="summarizer", input={})],
        )
    )
    assert message.tool_calls == [
        ToolCallRequest(id="t1", name="search", arguments={}),
        ToolCallRequest(id="s1", name="subagent__summarizer", arguments={}),
    ]


def test_create_tool_result_message_json_stringifies() -> None:
    message = create_tool_result_message(
        tool_call_id="tc1", tool_name="search", result={"items": ["a", "b"]}, success=True
    )
    assert message == ToolResultMessage(tool_call_id="tc1", tool_name="search", content='{"items":["a","b"]}')


def test_create_tool_result_message_error() -> None:
    message = create_tool_result_message(tool_call_id="tc1", tool_name="search", success=False, error="boom")
    assert message.content == "boom"
    assert message.metadata == {"is_error": True}


def test_create_sub_agent_result_message() -> None:
    message = create_sub_agent_result_message(
        tool_call_id="s1", agent_type="summarizer", result={"summary": "..."}, success=True
    )
    assert message == ToolResultMessage(
        tool_call_id="s1", tool_name="subagent__summarizer", content='{"summary":"..."}'
    )


def test_build_messages_for_llm_dynamic_prompt() -> None:
    history = [UserMessage(content="hi")]
    messages = build_messages_for_llm(
        history, lambda state: f"You have {len(state['notes'])} notes.", {"notes": [1, 2, 3, 4, 5]}
    )
    assert messages[0] == SystemMessage(content="You have 5 notes.")
    assert messages[1:] == history


def test_build_messages_for_llm_keeps_system_messages_in_the_history() -> None:
    """The seed only prepends the resolved prompt; a system message the history holds stays where it is."""
    history = [UserMessage(content="hi"), SystemMessage(content="Answer in French."), UserMessage(content="again")]
    messages = build_messages_for_llm(history, "Be brief.", None)
    assert messages == [SystemMessage(content="Be brief."), *history]
    assert build_messages_for_llm(history, "", None) == history


# --- the __finish__ history invariant: legacy heal on reopen ------------------------------------


def test_legacy_heal_finds_and_pairs_dangling_finish() -> None:
    legacy = [
        UserMessage(content="analyze"),
        AssistantMessage(tool_calls=[ToolCallRequest(id="f1", name=FINISH_TOOL_NAME, arguments={"result": "x"})]),
    ]
    assert find_unpaired_finish_call_id(legacy) == "f1"
    healed = [*legacy, *heal_unpaired_finish(legacy)]
    assert healed[-1] == ToolResultMessage(tool_call_id="f1", tool_name="__finish__", content='{"acknowledged":true}')
    assert find_unpaired_finish_call_id(healed) is None
    assert heal_unpaired_finish(healed) == []  # a no-op for healthy history
