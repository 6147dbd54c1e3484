"""The compacted view (pure): what the model sees keeps the system prompt and every call/result pair."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from helix_dbos import define_agent
from helix_dbos.compaction import CLEARED_TOOL_RESULT, SUMMARY_HEADER, CompactionPolicy, CompactionState
from helix_dbos.compaction.view import applies_to, compacted_view, plan_cleared_until, plan_cut, render_for_summary
from helix_dbos.errors import DefinitionError
from helix_dbos.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids

PROMPT = SystemMessage(content="You help.")


def call(i: int, name: str = "note") -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCallRequest(id=f"c{i}", name=name, arguments={"i": i})])


def result(i: int, name: str = "note") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=f"c{i}", tool_name=name, content=f'{{"i": {i}}}')


def transcript() -> list[Message]:
    """user, then 5 turns of (call, result), a finish pair, and a user turn: 14 messages."""
    messages: list[Message] = [UserMessage(content="go")]
    for i in range(5):
        messages += [call(i), result(i)]
    messages += [call(9, "__finish__"), result(9, "__finish__"), UserMessage(content="more")]
    return messages


@pytest.mark.parametrize("keep", range(1, 15))
def test_a_cut_never_starts_the_window_on_a_tool_result(keep: int) -> None:
    messages = transcript()
    cut = plan_cut(messages, keep, 0)
    assert not isinstance(messages[cut], ToolResultMessage) if cut < len(messages) else True
    view = compacted_view([PROMPT, *messages], len(messages), CompactionState(cut=cut))
    assert view[0] == PROMPT  # the system prompt is never dropped
    assert find_unpaired_tool_call_ids(view) == []
    assert not any(isinstance(m, ToolResultMessage) and m.tool_call_id not in _call_ids(view) for m in view)


def _call_ids(view: list[Message]) -> set[str]:
    return {c.id for m in view if isinstance(m, AssistantMessage) for c in m.tool_calls or []}


def test_a_cut_never_goes_back_past_the_previous_one() -> None:
    messages = transcript()
    assert plan_cut(messages, 2, 0) == 11  # moved back onto the __finish__ call, kept with its result
    assert plan_cut(messages, 1, 12) == 13
    assert plan_cut(messages, 100, 7) == 7
    assert plan_cut(messages, None, 3) == 3


def test_the_summary_follows_the_system_prompt_and_system_messages_of_the_dropped_part_stay() -> None:
    note = SystemMessage(content="Caller's own instruction.")
    messages: list[Message] = [note, *transcript()]
    view = compacted_view([PROMPT, *messages], len(messages), CompactionState(cut=6, summary="they counted"))
    assert view[:3] == [PROMPT, note, SystemMessage(content=SUMMARY_HEADER + "they counted")]
    assert view[3:] == messages[6:]


def test_clearing_keeps_the_pairing_and_the_last_turns() -> None:
    messages = transcript()
    cleared = plan_cleared_until(messages, 1, 2)
    assert cleared == 9  # the 2nd last calling turn (call 4) starts the kept results
    view = compacted_view(messages, len(messages), CompactionState(cut=1, cleared_until=cleared))
    contents = {m.tool_call_id: m.content for m in view if isinstance(m, ToolResultMessage)}
    assert contents == {
        **{f"c{i}": CLEARED_TOOL_RESULT for i in range(4)},
        "c4": '{"i": 4}',
        "c9": '{"i": 9}',
    }
    assert find_unpaired_tool_call_ids(view) == []
    assert plan_cleared_until(messages, 1, None) == 1
    assert plan_cleared_until(messages, 1, 0) == len(messages)


def test_no_state_is_the_transcript_and_a_state_longer_than_the_transcript_does_not_apply() -> None:
    messages = transcript()
    assert compacted_view([PROMPT, *messages], len(messages), None) == [PROMPT, *messages]
    assert applies_to(CompactionState(cut=20), len(messages)) is None
    assert applies_to(CompactionState(cut=3), len(messages)) == CompactionState(cut=3)


def test_the_summariser_reads_the_earlier_summary_and_the_calls() -> None:
    text = render_for_summary(transcript()[:3], "before")
    assert text.splitlines() == [
        "Earlier summary:",
        "before",
        "",
        "user: go",
        "assistant:  [called note({'i': 0})]",
        'tool note: {"i": 0}',
    ]


def test_a_policy_must_compact_something_and_an_agent_takes_only_a_policy() -> None:
    with pytest.raises(ValidationError):
        CompactionPolicy(max_input_tokens=100, keep_last_messages=None)
    with pytest.raises(ValidationError):
        CompactionPolicy(
            max_input_tokens=100, keep_last_messages=None, clear_tool_results_after_turns=1, summarize=True
        )
    with pytest.raises(ValidationError):
        CompactionPolicy(max_input_tokens=0)
    with pytest.raises(DefinitionError, match="compaction must be a CompactionPolicy"):
        define_agent("a", system_prompt="x", llm_config="openai/x", compaction={"max_input_tokens": 5})  # type: ignore[arg-type]
