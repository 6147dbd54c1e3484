"""Output modes, the pure parts: repairing a text answer, planning a direct answer, the request
format and the prompt section, and the definitions ``define_agent`` refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import LLMConfig, PersistentAgentConfig, define_agent, define_tool
from helix_dbos.errors import DefinitionError
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.llm.litellm.adapter import import_litellm
from helix_dbos.llm.litellm.request import build_request
from helix_dbos.llm.litellm.response import RawResponse, step_result
from helix_dbos.logger import std_logger
from helix_dbos.orchestration.output_modes import (
    native_response_format,
    parse_text_output,
    plan_direct_output,
    prompted_output_section,
)
from helix_dbos.orchestration.state_operations import (
    build_agent_messages_for_llm,
    build_effective_tools,
    completion_tool_name,
)
from helix_dbos.runtime.registry import agent_fingerprint
from helix_dbos.step_result import StructuredOutputStepResult, TextStepResult, ToolCallsStepResult

LOG = std_logger("tests.output_modes")


class Verdict(BaseModel):
    city: str
    score: int
    note: str | None = None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  {"a": [1, 2,],}  ', {"a": [1, 2]}),  # trailing commas
        (json.dumps(json.dumps({"a": 1})), {"a": 1}),  # JSON in a JSON string
        ('Sure! Here you go: {"a": "x, }"} Hope it helps.', {"a": "x, }"}),  # inside prose; comma in a string kept
        ('```json\n{"a": 2,}\n```', {"a": 2}),  # code fence
        ("Answer:\n```\n[1, 2]\n```\nDone.", [1, 2]),
        ('"just a string"', "just a string"),
    ],
)
def test_parse_text_output_repairs_almost_json(text: str, expected: Any) -> None:
    assert parse_text_output(text) == (True, expected)


@pytest.mark.parametrize("text", ["", "no json here", "{broken", '{"a": }'])
def test_parse_text_output_refuses_what_holds_no_json(text: str) -> None:
    assert parse_text_output(text) == (False, None)


def test_a_valid_text_answer_completes_with_the_validated_output() -> None:
    step = TextStepResult(
        content='```json\n{"city": "Rome", "score": 3}\n```', should_stop=True, stop_reason="end_turn"
    )
    plan = plan_direct_output(step, Verdict, LOG)
    assert plan is not None and plan.is_terminal and plan.output_validation_error is None
    assert plan.output == {"city": "Rome", "score": 3, "note": None}
    assert plan.assistant_message_plan is not None and plan.assistant_message_plan.content == step.content


def test_an_invalid_answer_carries_the_problem_and_does_not_end_the_run() -> None:
    plan = plan_direct_output(StructuredOutputStepResult(output={"city": "Rome"}), Verdict, LOG)
    assert plan is not None and not plan.is_terminal
    assert plan.output_validation_error is not None and "score" in plan.output_validation_error
    assert plan.assistant_message_plan is not None and plan.assistant_message_plan.content == '{"city": "Rome"}'


def test_tool_calls_and_cut_off_text_are_not_answers() -> None:
    calls = ToolCallsStepResult(tool_calls=[{"id": "c1", "name": "lookup", "arguments": {}}], stop_reason="tool_use")
    cut = TextStepResult(content='{"city": "Ro', should_stop=False, stop_reason="max_tokens")
    assert plan_direct_output(calls, Verdict, LOG) is None
    assert plan_direct_output(cut, Verdict, LOG) is None


def test_a_non_object_schema_is_wrapped_and_either_form_is_accepted() -> None:
    assert native_response_format(list[int])["json_schema"]["schema"]["required"] == ["value"]
    for text in ('{"value": [1, 2]}', "[1, 2]"):
        plan = plan_direct_output(TextStepResult(content=text, should_stop=True), list[int], LOG)
        assert plan is not None and plan.output == [1, 2]


def test_a_string_schema_takes_plain_text() -> None:
    plan = plan_direct_output(TextStepResult(content="Paris", should_stop=True), str, LOG)
    assert plan is not None and plan.is_terminal and plan.output == "Paris"


def _agent(mode: str, **kwargs: Any) -> Any:
    return define_agent(
        f"om-{mode}", system_prompt="Judge.", llm_config="openai/x", output_schema=Verdict, output_mode=mode, **kwargs
    )


def test_only_tool_mode_has_the_finish_tool_and_prompted_mode_has_the_schema_section() -> None:
    tool, native, prompted = _agent("tool"), _agent("native"), _agent("prompted")
    assert [t.name for t in build_effective_tools(tool)] == ["__finish__"] and completion_tool_name(
        tool
    ) == "__finish__"
    for agent in (native, prompted):
        assert build_effective_tools(agent) == [] and completion_tool_name(agent) is None
    system = build_agent_messages_for_llm(prompted, [], {})[0].content
    assert system == "Judge.\n\n" + prompted_output_section(Verdict)
    assert json.dumps(Verdict.model_json_schema(), sort_keys=True) in system
    assert "Output Format" not in build_agent_messages_for_llm(native, [], {})[0].content


def test_the_fingerprint_of_a_tool_mode_agent_does_not_change() -> None:
    implicit = define_agent("om-fp", system_prompt="Judge.", llm_config="openai/x", output_schema=Verdict)
    assert agent_fingerprint(implicit) == agent_fingerprint(_agent("tool").model_copy(update={"name": "om-fp"}))
    assert agent_fingerprint(implicit) != agent_fingerprint(_agent("native").model_copy(update={"name": "om-fp"}))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"output_mode": "json"}, "output_mode must be"),
        ({"output_mode": "native", "output_schema": None}, "needs an output_schema"),
    ],
)
def test_define_agent_refuses_bad_output_modes(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"system_prompt": "x", "llm_config": "openai/x", "output_schema": Verdict, **kwargs}
    with pytest.raises(DefinitionError, match=message) as info:
        define_agent("om-bad", **args)
    assert info.value.code == "validation_error"


def test_define_agent_refuses_finish_with_tools_and_companions_outside_tool_mode() -> None:
    submit = define_tool("submit", input_schema=Verdict, execute=lambda inp, ctx: inp, finish_with=True)
    with pytest.raises(DefinitionError, match="finish_with tools"):
        _agent("prompted", tools=[submit])
    with pytest.raises(DefinitionError, match="completes via __finish__"):
        define_agent(
            "om-parent",
            system_prompt="x",
            llm_config="openai/x",
            persistent_agents=[PersistentAgentConfig(agent=_agent("native"), mode="blocking")],
        )


def _request(model: str) -> dict[str, Any]:
    input = LLMGenerateInput(
        messages=[],
        tools=[],
        config=LLMConfig(model=model, api_base="http://127.0.0.1:1/v1"),
        agent_id="r",
        agent_type="a",
        response_format=native_response_format(Verdict),
    )
    return build_request(import_litellm(), input, stream=False, strict_providers={"openai"}).kwargs


def test_the_response_format_is_strict_only_for_providers_that_enforce_it() -> None:
    strict = _request("openai/fake")["response_format"]["json_schema"]
    assert strict["strict"] is True and strict["schema"]["additionalProperties"] is False
    loose = _request("hosted_vllm/fake")["response_format"]["json_schema"]
    assert "strict" not in loose and loose["schema"] == Verdict.model_json_schema()


def test_a_structured_request_answers_with_structured_output_unless_it_called_tools_or_was_cut() -> None:
    class Tagged(BaseModel):
        city: str
        tag: str = "none"  # optional, not nullable: strict mode's forced null is dropped

    answer = RawResponse(text='{"city": "Rome", "tag": null}', finish_reason="stop")
    result = step_result(answer, [], structured_output=True, strict_output_schema=Tagged.model_json_schema())
    assert isinstance(result, StructuredOutputStepResult) and result.output == {"city": "Rome"}
    assert isinstance(step_result(answer, []), TextStepResult)  # no response_format: text as before
    cut = RawResponse(text='{"city": "Ro', finish_reason="length")
    assert isinstance(step_result(cut, [], structured_output=True), TextStepResult)
    prose = RawResponse(text="not json", finish_reason="stop")
    assert step_result(prose, [], structured_output=True) == StructuredOutputStepResult(
        output="not json", stop_reason="end_turn"
    )
