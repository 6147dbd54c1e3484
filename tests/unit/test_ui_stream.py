"""Helix chunks -> AI SDK UI message stream parts, and what a ``useChat`` post asks: pure logic.

The end-to-end proof with the AI SDK's own client is ``tests/service/test_ai_sdk_client.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from helix_dbos.errors import HelixError
from helix_dbos.orchestration.message_builder import NOT_APPROVED_MESSAGE
from helix_dbos.service.ui_chat import (
    Answers,
    NewTurn,
    UIChatRequest,
    chat_session_id,
    plan_request,
    tool_answers,
    turn_key,
)
from helix_dbos.service.ui_stream import (
    UI_MESSAGE_STREAM_HEADERS,
    UIMessageStreamTranslator,
    ends_reply,
    part_json,
)
from helix_dbos.session import ApprovalResponse, ClientToolResult
from helix_dbos.stream.chunks import (
    CheckpointCreatedChunk,
    CustomEventChunk,
    ErrorChunk,
    OutputChunk,
    RunInterruptedChunk,
    RunPausedChunk,
    RunResumedChunk,
    StatePatchChunk,
    StreamChunk,
    SubAgentEndChunk,
    SubAgentStartChunk,
    TextDeltaChunk,
    ThinkingChunk,
    ToolApprovalRequestChunk,
    ToolEndChunk,
    ToolStartChunk,
)

ROOT = {"agent_id": "s1-turn-1", "agent_type": "writer"}


def run(chunks: list[StreamChunk], translator: UIMessageStreamTranslator | None = None) -> list[dict[str, Any]]:
    t = translator or UIMessageStreamTranslator()
    parts = t.start("msg-1")
    for chunk in chunks:
        parts += t.translate(chunk)
    return parts + t.finish()


def types(parts: list[dict[str, Any]]) -> list[str]:
    return [p["type"] for p in parts]


def test_text_and_reasoning_become_start_delta_end_parts_within_steps() -> None:
    parts = run(
        [
            ThinkingChunk(**ROOT, step=1, content="hmm"),
            ThinkingChunk(**ROOT, step=1, content="", is_complete=True),
            TextDeltaChunk(**ROOT, step=1, content="Hel"),
            TextDeltaChunk(**ROOT, step=1, content="lo"),
            CheckpointCreatedChunk(**ROOT, step=1, checkpoint_id="c", step_count=1),
            TextDeltaChunk(**ROOT, step=2, content="again"),
        ]
    )
    assert parts == [
        {"type": "start", "messageId": "msg-1"},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "reasoning-1"},
        {"type": "reasoning-delta", "id": "reasoning-1", "delta": "hmm"},
        {"type": "reasoning-end", "id": "reasoning-1"},
        {"type": "text-start", "id": "text-2"},
        {"type": "text-delta", "id": "text-2", "delta": "Hel"},
        {"type": "text-delta", "id": "text-2", "delta": "lo"},
        {"type": "text-end", "id": "text-2"},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-3"},
        {"type": "text-delta", "id": "text-3", "delta": "again"},
        {"type": "text-end", "id": "text-3"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


def test_tool_calls_their_results_and_errors() -> None:
    parts = run(
        [
            TextDeltaChunk(**ROOT, step=1, content="Let me look."),
            ToolStartChunk(**ROOT, step=1, tool_call_id="c1", tool_name="search", arguments={"q": "x"}),
            StatePatchChunk(**ROOT, step=1, patches=[{"op": "add", "path": "/n", "value": 1}]),
            CustomEventChunk(**ROOT, step=1, event_name="progress report", data={"pct": 50}),
            ToolEndChunk(**ROOT, step=1, tool_call_id="c1", tool_name="search", result={"hits": 2}),
            ToolEndChunk(**ROOT, step=1, tool_call_id="c2", tool_name="fetch", success=False, error="boom"),
            OutputChunk(**ROOT, step=1, output={"answer": 42}),
        ]
    )
    assert parts[1:] == [
        {"type": "start-step"},
        {"type": "text-start", "id": "text-1"},
        {"type": "text-delta", "id": "text-1", "delta": "Let me look."},
        {"type": "text-end", "id": "text-1"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "search", "input": {"q": "x"}},
        {"type": "data-state-patch", "data": {"patches": [{"op": "add", "path": "/n", "value": 1}]}},
        {"type": "data-progress-report", "data": {"pct": 50}},
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"hits": 2}},
        # A result whose start this reply never saw (it began before the reply did) is announced first.
        {"type": "tool-input-available", "toolCallId": "c2", "toolName": "fetch", "input": {}},
        {"type": "tool-output-error", "toolCallId": "c2", "errorText": "boom"},
        {"type": "data-output", "data": {"output": {"answer": 42}}},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


def test_an_approval_request_and_its_refusal() -> None:
    t = UIMessageStreamTranslator()
    parts = t.translate(ToolStartChunk(**ROOT, step=1, tool_call_id="r1", tool_name="remove", arguments={"p": "/x"}))
    parts += t.translate(
        ToolApprovalRequestChunk(
            **ROOT, step=1, tool_call_id="r1", tool_name="remove", arguments={"p": "/x"}, arguments_digest="d"
        )
    )
    assert types(parts) == ["start-step", "tool-input-available", "tool-approval-request"]
    assert parts[-1] == {"type": "tool-approval-request", "approvalId": "r1", "toolCallId": "r1"}
    # The reply that continues after the browser's answer knows the call and that it was an approval.
    after = UIMessageStreamTranslator(known_tool_calls={"r1": False}, approval_calls=["r1"])
    denied = after.translate(RunResumedChunk(**ROOT, step=2))
    denied += after.translate(
        ToolEndChunk(**ROOT, step=2, tool_call_id="r1", tool_name="remove", success=False, error=NOT_APPROVED_MESSAGE)
    )
    assert denied == [{"type": "start-step"}, {"type": "tool-output-denied", "toolCallId": "r1"}]
    approved = UIMessageStreamTranslator(known_tool_calls={"r1": False}, approval_calls=["r1"])
    started_again = approved.translate(
        ToolStartChunk(**ROOT, step=2, tool_call_id="r1", tool_name="remove", arguments={"p": "/x"})
    )
    assert started_again == [], "a call the browser shows is not announced again (useChat would reset it)"


def test_sub_agents_are_dynamic_tool_parts_and_their_chunks_stay_out_of_the_text() -> None:
    child = {"agent_id": "s1-sub-t1-turn-1", "agent_type": "researcher"}
    parts = run(
        [
            SubAgentStartChunk(
                **ROOT, step=1, sub_agent_id="s1-sub-t1", sub_agent_type="researcher", tool_call_id="t1"
            ),
            TextDeltaChunk(**child, step=1, content="child text"),
            SubAgentEndChunk(
                **ROOT, step=1, sub_agent_id="s1-sub-t1", sub_agent_type="researcher", tool_call_id="t1", result="ok"
            ),
            TextDeltaChunk(**ROOT, step=2, content="parent text"),
        ]
    )
    assert parts[2] == {
        "type": "tool-input-available",
        "toolCallId": "t1",
        "toolName": "researcher",
        "input": None,
        "dynamic": True,
    }
    assert parts[3]["type"] == "data-subagent-chunk" and parts[3]["transient"] is True
    assert parts[3]["data"]["content"] == "child text"
    assert parts[4] == {"type": "tool-output-available", "toolCallId": "t1", "output": "ok", "dynamic": True}
    texts = [p["delta"] for p in parts if p["type"] == "text-delta"]
    assert texts == ["parent text"]


def test_errors_pauses_and_interrupts() -> None:
    t = UIMessageStreamTranslator()
    recoverable = t.translate(
        ErrorChunk(**ROOT, step=1, error="rate limited", code="provider_rate_limit", recoverable=True)
    )
    assert recoverable[-1] == {
        "type": "data-error",
        "data": {"error": "rate limited", "code": "provider_rate_limit"},
        "transient": True,
    }
    fatal = t.translate(ErrorChunk(**ROOT, step=1, error="it broke"))
    assert fatal == [{"type": "error", "errorText": "it broke"}]
    assert t.fail("gone") == [{"type": "finish-step"}, {"type": "error", "errorText": "gone"}]
    paused = RunPausedChunk(**ROOT, step=1, reason="awaiting_tool_results", pending_tool_call_ids=["c"])
    assert t.translate(paused) == [] and ends_reply(paused) == "tool-calls"
    assert ends_reply(RunInterruptedChunk(**ROOT, step=1)) == "interrupted"
    assert ends_reply(TextDeltaChunk(**ROOT, content="x")) is None


def test_the_wire_format_matches_the_ai_sdk() -> None:
    assert UI_MESSAGE_STREAM_HEADERS["x-vercel-ai-ui-message-stream"] == "v1"
    assert part_json({"type": "text-delta", "id": "t", "delta": "é"}) == '{"type":"text-delta","id":"t","delta":"é"}'
    assert UIMessageStreamTranslator().start("m", {"sessionId": "s"}) == [
        {"type": "start", "messageId": "m", "messageMetadata": {"sessionId": "s"}}
    ]


# --- the post ----------------------------------------------------------------------------------------


def _request(*messages: dict[str, Any], **extra: Any) -> UIChatRequest:
    return UIChatRequest.model_validate(
        {"id": "chat1", "messages": list(messages), "trigger": "submit-message", **extra}
    )


def test_a_user_message_is_a_new_turn_keyed_by_chat_and_message() -> None:
    plan = plan_request(
        _request(
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "you"}]}
        )
    )
    assert plan == NewTurn(text="Hi you", idempotency_key=turn_key("chat1", "u1"))
    with pytest.raises(HelixError) as err:
        plan_request(_request({"id": "u1", "role": "user", "parts": [{"type": "file", "url": "data:,x"}]}))
    assert err.value.code == "validation_error"


def test_the_chat_session_is_deterministic_and_scoped_to_the_caller() -> None:
    assert chat_session_id("c", "bearer:a") == chat_session_id("c", "bearer:a")
    assert chat_session_id("c", "bearer:a") != chat_session_id("c", "bearer:b")
    assert chat_session_id("c", "x").startswith("chat-")


def test_an_assistant_message_answers_the_open_calls_only() -> None:
    parts = [
        {"type": "tool-note", "toolCallId": "n1", "state": "output-available", "output": {"saved": 1}},
        {"type": "tool-get_location", "toolCallId": "g1", "state": "output-available", "output": {"city": "Lima"}},
        {"type": "tool-get_location", "toolCallId": "g2", "state": "output-error", "errorText": "denied by browser"},
        {
            "type": "tool-remove",
            "toolCallId": "r1",
            "state": "approval-responded",
            "approval": {"id": "r1", "approved": True},
        },
        {
            "type": "dynamic-tool",
            "toolCallId": "r2",
            "state": "approval-responded",
            "approval": {"id": "r2", "approved": False, "reason": "no"},
        },
        {"type": "tool-get_location", "toolCallId": "g3", "state": "input-available", "input": {}},
    ]
    plan = plan_request(_request({"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "x"}, *parts]}))
    assert isinstance(plan, Answers)
    assert plan.message_id == "a1"
    assert plan.known_tool_calls == {"n1": False, "g1": False, "g2": False, "r1": False, "r2": True, "g3": False}
    assert plan.approval_calls == frozenset({"r1", "r2"})
    open_calls = {"g1": "client", "g2": "client", "r1": "approval", "r2": "approval", "g3": "client"}
    assert tool_answers(plan.parts, open_calls) == [
        ClientToolResult(tool_call_id="g1", result={"city": "Lima"}),
        ClientToolResult(tool_call_id="g2", error="denied by browser"),
        ApprovalResponse(tool_call_id="r1", approved=True),
        ApprovalResponse(tool_call_id="r2", approved=False, reason="no"),
    ]
    # Answered before (not open any more): a repeated post submits nothing.
    assert tool_answers(plan.parts, {}) == []
    assert plan_request(_request({"id": "a1", "role": "assistant", "parts": []}, messageId="a0")).message_id == "a0"  # type: ignore[union-attr]


def test_a_rerun_of_an_unknown_outcome_is_answered_like_an_approval() -> None:
    """A not-retry-safe call whose worker died mid-call waits on an approval of kind ``rerun``."""
    part = {"type": "tool-charge", "toolCallId": "c1", "state": "approval-responded", "approval": {"approved": True}}
    assert tool_answers([part], {"c1": "rerun"}) == [ApprovalResponse(tool_call_id="c1", approved=True)]
