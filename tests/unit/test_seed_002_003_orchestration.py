"""Examples of seeds 002 (orchestration helpers) and 003 (finishing agents) that need no runtime."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from helix_dbos import AgentInput, SystemMessage, UserInputMessage, UserMessage, define_agent, define_tool
from helix_dbos._clock import now_ms
from helix_dbos.checkpoint import generate_checkpoint_id, parse_checkpoint_id
from helix_dbos.orchestration.message_builder import output_requirement_section
from helix_dbos.orchestration.state_operations import (
    build_agent_messages_for_llm,
    build_effective_tools,
    completion_tool_name,
    initialize_agent_state,
)
from helix_dbos.orchestration.step_processor import coerce_tool_call_arguments, repair_structured_output
from helix_dbos.session import agent_status_to_session_status, session_status_to_agent_status
from helix_dbos.tool import FINISH_TOOL_NAME


class Sentiment(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    confidence: float


class SearchIn(BaseModel):
    query: str


class AnswerIn(BaseModel):
    answer: str
    verified: bool


class Notes(BaseModel):
    notes: list[str] = Field(default_factory=list)
    count: int = 0


def _search(inp: SearchIn, ctx: object) -> dict[str, list[str]]:
    return {"results": [inp.query]}


def _submit(inp: AnswerIn, ctx: object) -> dict[str, str]:
    return {"result": inp.answer}


search_tool = define_tool("search", description="Search", input_schema=SearchIn, execute=_search)
submit_answer_tool = define_tool(
    "submit_answer", description="Submit", input_schema=AnswerIn, execute=_submit, finish_with=True
)


# --- seed 003: mutual exclusivity of __finish__ and finish_with ------------------------------


def test_finish_injected_without_finish_with_tools() -> None:
    agent = define_agent(
        "simple-agent",
        system_prompt="x",
        llm_config="openai/gpt-4o",
        tools=[search_tool],
        output_schema=Sentiment,
    )
    assert [t.name for t in build_effective_tools(agent)] == ["search", "__finish__"]
    assert completion_tool_name(agent) == FINISH_TOOL_NAME


def test_finish_not_injected_with_finish_with_tool() -> None:
    agent = define_agent(
        "submission-agent",
        system_prompt="x",
        llm_config="openai/gpt-4o",
        tools=[submit_answer_tool],
        output_schema=Sentiment,
    )
    assert [t.name for t in build_effective_tools(agent)] == ["submit_answer"]
    assert completion_tool_name(agent) == "submit_answer"


def test_no_output_schema_means_no_finish_tool() -> None:
    agent = define_agent("chat", system_prompt="x", llm_config="openai/gpt-4o", tools=[search_tool])
    assert [t.name for t in build_effective_tools(agent)] == ["search"]
    assert completion_tool_name(agent) is None


def test_finish_tool_schema_comes_from_output_schema() -> None:
    agent = define_agent("analyzer", system_prompt="x", llm_config="openai/gpt-4o", output_schema=Sentiment)
    (finish,) = build_effective_tools(agent)
    schema = finish.json_schema()
    assert set(schema["properties"]) == {"sentiment", "confidence"}
    assert finish.strict is False


def test_strict_output_marks_finish_tool_strict() -> None:
    agent = define_agent(
        "researcher",
        system_prompt="x",
        llm_config={"model": "anthropic/claude-sonnet-4-5", "strict_output": True},
        output_schema=Sentiment,
    )
    (finish,) = build_effective_tools(agent)
    assert finish.strict is True


def test_output_requirement_section_text() -> None:
    assert output_requirement_section("__finish__") == (
        "## Output Requirement\n"
        "This task requires structured output. You MUST complete your work by calling\n"
        "the `__finish__` tool. This tool will process your output and complete the task.\n"
        "DO NOT use any other method to return your final answer."
    )


def test_system_prompt_names_the_completion_tool() -> None:
    with_finish = define_agent("a", system_prompt="Analyze.", llm_config="openai/gpt-4o", output_schema=Sentiment)
    messages = build_agent_messages_for_llm(with_finish, [UserMessage(content="hi")], {})
    assert isinstance(messages[0], SystemMessage)
    assert messages[0].content.startswith("Analyze.\n\n## Output Requirement")
    assert "`__finish__`" in messages[0].content

    with_submit = define_agent(
        "b",
        system_prompt="Answer.",
        llm_config="openai/gpt-4o",
        tools=[submit_answer_tool],
        output_schema=Sentiment,
    )
    messages = build_agent_messages_for_llm(with_submit, [UserMessage(content="hi")], {})
    assert "`submit_answer`" in messages[0].content and "`__finish__`" not in messages[0].content


def test_dynamic_prompt_sees_typed_state() -> None:
    agent = define_agent(
        "notes",
        system_prompt=lambda s: f"You have {len(s.notes)} notes.",
        llm_config="openai/gpt-4o",
        state_schema=Notes,
    )
    messages = build_agent_messages_for_llm(agent, [], {"notes": ["a", "b"], "count": 2})
    assert messages == [SystemMessage(content="You have 2 notes.")]


# --- seed 002: initializeAgentState ----------------------------------------------------------


def test_initialize_agent_state_from_string() -> None:
    agent = define_agent("notes", system_prompt="x", llm_config="openai/gpt-4o", state_schema=Notes)
    state = initialize_agent_state(agent=agent, input="Hello", run_id="run-123", stream_id="run-123")
    assert state.session_id == "run-123"
    assert state.agent_type == "notes"
    assert state.status == "running"
    assert state.step_count == 0
    assert state.custom_state == {"notes": [], "count": 0}  # schema defaults applied
    assert state.messages == [UserMessage(content="Hello")]


def test_initialize_agent_state_multi_message_and_state_override() -> None:
    agent = define_agent("notes", system_prompt="x", llm_config="openai/gpt-4o", state_schema=Notes)
    state = initialize_agent_state(
        agent=agent,
        input=AgentInput(
            message=[
                UserInputMessage(content="Context", metadata={"hidden": True}),
                UserInputMessage(content="Question"),
            ],
            state={"count": 5},
        ),
        run_id="run-123",
        stream_id="run-123",
        session_id="s-1",
    )
    assert state.session_id == "s-1"
    assert state.custom_state == {"notes": [], "count": 5}
    assert state.messages == [
        UserMessage(content="Context", metadata={"hidden": True}),
        UserMessage(content="Question"),
    ]


# --- seed 002: tool-input coercion helpers ---------------------------------------------------


def test_coerce_tool_call_arguments() -> None:
    assert coerce_tool_call_arguments({"a": 1}) == {"a": 1}
    assert coerce_tool_call_arguments('{"a":1}') == {"a": 1}
    for junk in (None, 3, "[1]", "not json", ["a"]):
        assert coerce_tool_call_arguments(junk) == {}


def test_coerce_warns_through_the_logger() -> None:
    seen: list[str] = []

    class Recorder:
        def debug(self, message: str, data: object = None) -> None: ...
        def info(self, message: str, data: object = None) -> None: ...
        def warn(self, message: str, data: object = None) -> None:
            seen.append(message)

        def error(self, message: str, data: object = None) -> None: ...

    coerce_tool_call_arguments(42, Recorder())
    assert seen == ["[helix-dbos] non-object tool-call input coerced to {}"]


def test_repair_structured_output_is_schema_aware() -> None:
    assert repair_structured_output('{"sentiment":"positive","confidence":1}', Sentiment) == {
        "sentiment": "positive",
        "confidence": 1,
    }
    # A legitimate string output is preserved, never parsed or coerced.
    assert repair_structured_output('{"a":1}', str) == '{"a":1}'
    assert repair_structured_output("[1, 2]", list[int]) == [1, 2]
    # A JSON string that does not match the schema is returned unchanged.
    assert repair_structured_output('{"nope":1}', Sentiment) == '{"nope":1}'
    assert repair_structured_output("not json", Sentiment) == "not json"


# --- seed 002: statuses and checkpoint ids -----------------------------------------------------


def test_status_conversion() -> None:
    assert session_status_to_agent_status("active") == "running"
    assert session_status_to_agent_status("completed") == "completed"
    assert agent_status_to_session_status("running") == "active"
    assert agent_status_to_session_status("waiting_tool") == "active"
    assert agent_status_to_session_status("suspended_client_tool") == "active"
    assert agent_status_to_session_status("interrupted") == "interrupted"


def test_checkpoint_id_format_round_trips() -> None:
    checkpoint_id = generate_checkpoint_id("session-123", 5, timestamp_ms=1703123456789, random="a1b2c3")
    assert checkpoint_id == "cpv1-session-123-s5-t1703123456789-a1b2c3"
    parsed = parse_checkpoint_id(checkpoint_id)
    assert parsed is not None
    assert parsed.model_dump() == {
        "version": 1,
        "session_id": "session-123",
        "step_count": 5,
        "timestamp": 1703123456789,
        "random": "a1b2c3",
    }
    assert parse_checkpoint_id("not-a-checkpoint") is None


def test_generate_checkpoint_id_accepts_the_seeds_call() -> None:
    before = now_ms()
    checkpoint_id = generate_checkpoint_id("session-123", 5)
    parsed = parse_checkpoint_id(checkpoint_id)
    assert parsed is not None
    assert (parsed.session_id, parsed.step_count) == ("session-123", 5)
    assert before <= parsed.timestamp <= now_ms()
    assert len(parsed.random) == 6
