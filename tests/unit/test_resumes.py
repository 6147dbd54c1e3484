"""Which resumed runs take the ``{agent}.resumed`` step: those that do not continue a batch of calls."""

from __future__ import annotations

from helix_dbos.messages import AssistantMessage, ToolCallRequest, ToolResultMessage, UserMessage
from helix_dbos.runtime.resumes import continues_a_batch


def call(call_id: str, name: str = "ask") -> ToolCallRequest:
    return ToolCallRequest(id=call_id, name=name, arguments={})


def result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="ask", content="1")


def test_a_transcript_ending_in_unanswered_calls_continues_a_batch() -> None:
    asked = AssistantMessage(tool_calls=[call("c1"), call("c2")])
    assert continues_a_batch([UserMessage(content="go"), asked, result("c1")])
    # An earlier result with the same id answered an earlier call, not this one.
    earlier = [AssistantMessage(tool_calls=[call("c1")]), result("c1")]
    assert continues_a_batch([*earlier, AssistantMessage(tool_calls=[call("c1")])])


def test_answered_calls_text_and_a_lone_finish_call_do_not() -> None:
    assert not continues_a_batch([])
    assert not continues_a_batch([UserMessage(content="go")])
    asked = AssistantMessage(tool_calls=[call("c1")])
    assert not continues_a_batch([asked, result("c1"), AssistantMessage(content="done")])
    assert not continues_a_batch([asked, result("c1")])
    assert not continues_a_batch([AssistantMessage(tool_calls=[call("f1", "__finish__")])])
