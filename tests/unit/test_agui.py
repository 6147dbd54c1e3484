"""The AG-UI mapping, purely: what a RunAgentInput asks for, and which events a run's chunks become.

The end-to-end proof is ``tests/service/test_agui_client.py`` (AG-UI's own client against a live
server); these pin the decisions that a live run reaches only by timing: a checkpoint announced
after the response started, a resume in the middle of a message, the outcome a pause maps to.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from helix_dbos.errors import AGUIInputError
from helix_dbos.orchestration.message_builder import NOT_APPROVED_MESSAGE
from helix_dbos.service.agui import (
    AGUIAnswers,
    AGUIResumeEntry,
    AGUITurn,
    RunAgentInput,
    plan_run,
    thread_session_id,
    tool_answers,
)
from helix_dbos.service.agui_events import AGUIEventTranslator
from helix_dbos.session import ApprovalResponse, ClientToolResult
from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import (
    CheckpointCreatedChunk,
    ErrorChunk,
    OutputChunk,
    RunPausedChunk,
    StatePatchChunk,
    StreamChunk,
    TextDeltaChunk,
    ToolApprovalRequestChunk,
    ToolEndChunk,
    ToolStartChunk,
)

SESSION = "agui-s"
RUN = f"{SESSION}-turn-1"


def base(step: int = 1, agent_id: str = RUN) -> dict[str, Any]:
    return {"agent_id": agent_id, "agent_type": "a", "step": step}


def records(*chunks: StreamChunk, first: int = 1) -> list[ChunkRecord]:
    return [ChunkRecord(sequence=first + i, chunk=chunk) for i, chunk in enumerate(chunks)]


def translator(**kwargs: Any) -> AGUIEventTranslator:
    return AGUIEventTranslator(thread_id="t", run_id="r", session_id=SESSION, message_prefix=RUN, **kwargs)


def run_all(t: AGUIEventTranslator, recs: list[ChunkRecord]) -> list[dict[str, Any]]:
    events = t.start()
    for record in recs:
        events.extend(t.translate(record))
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def body(**fields: Any) -> RunAgentInput:
    return RunAgentInput.model_validate({"threadId": "t", "runId": "r", **fields})


# -- what a post asks for ---------------------------------------------------------------------------------


def test_a_user_message_last_is_a_turn_keyed_by_thread_and_run() -> None:
    plan = plan_run(body(messages=[{"id": "u", "role": "user", "content": "hi"}], state={"n": 1}))
    assert plan == AGUITurn(text="hi", idempotency_key="agui:t:r", state={"n": 1})
    parts = [{"type": "text", "text": "a"}, {"type": "binary", "mimeType": "image/png"}, {"type": "text", "text": "b"}]
    assert isinstance(turn := plan_run(body(messages=[{"id": "u", "role": "user", "content": parts}])), AGUITurn)
    assert turn.text == "ab"


def test_tool_messages_last_or_resume_entries_are_answers() -> None:
    messages = [
        {"id": "u", "role": "user", "content": "hi"},
        {"id": "a", "role": "assistant", "toolCalls": [{"id": "c1", "type": "function", "function": {}}]},
        {"id": "m1", "role": "tool", "toolCallId": "c1", "content": '{"city": "Lima"}'},
        {"id": "m2", "role": "tool", "toolCallId": "c2", "content": "no", "error": "refused"},
    ]
    plan = plan_run(body(messages=messages))
    assert isinstance(plan, AGUIAnswers) and [m.id for m in plan.results] == ["m1", "m2"]
    resumed = plan_run(body(messages=messages[:2], resume=[{"interruptId": "c3", "status": "cancelled"}]))
    assert isinstance(resumed, AGUIAnswers) and not resumed.results and resumed.resume[0].interruptId == "c3"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"messages": [{"id": "a", "role": "assistant", "content": "x"}]}, "last message must be the user's"),
        ({"messages": [{"id": "u", "role": "user", "content": "  "}]}, "no text"),
        ({"messages": [{"id": "m", "role": "tool", "content": "x"}]}, "has no toolCallId"),
    ],
)
def test_a_body_the_service_cannot_act_on_is_a_typed_error(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(AGUIInputError, match=says) as raised:
        plan_run(body(**fields))
    assert raised.value.code == "validation_error" and not raised.value.retryable


@pytest.mark.parametrize("fields", [{"messages": []}, {"messages": [{"id": "u", "role": "user"}], "state": [1]}])
def test_what_the_schema_says_is_refused_by_the_model(fields: dict[str, Any]) -> None:
    """No messages, a state that is not an object: the OpenAPI schema says so, and the route answers 422."""
    with pytest.raises(ValidationError):
        body(**fields)


def test_answers_become_submissions_for_open_calls_only() -> None:
    answers = AGUIAnswers(
        results=body(
            messages=[
                {"id": "m1", "role": "tool", "toolCallId": "c1", "content": '{"city": "Lima"}'},
                {"id": "m2", "role": "tool", "toolCallId": "c2", "content": "x", "error": "it broke"},
                {"id": "m3", "role": "tool", "toolCallId": "done", "content": "late"},
                {"id": "m4", "role": "tool", "toolCallId": "c4", "content": "plain text"},
            ]
        ).messages,
        resume=[
            AGUIResumeEntry(interruptId="a1", status="resolved"),
            AGUIResumeEntry(interruptId="a2", status="resolved", payload={"approved": False, "reason": "no"}),
            AGUIResumeEntry(interruptId="a3", status="cancelled"),
            AGUIResumeEntry(interruptId="c1", status="resolved"),
        ],
    )
    kinds = {"c1": "client", "c2": "client", "c4": "client", "a1": "approval", "a2": "approval", "a3": "rerun"}
    assert tool_answers(answers, kinds) == [
        ClientToolResult(tool_call_id="c1", result={"city": "Lima"}),
        ClientToolResult(tool_call_id="c2", error="it broke"),
        ClientToolResult(tool_call_id="c4", result="plain text"),
        ApprovalResponse(tool_call_id="a1", approved=True),
        ApprovalResponse(tool_call_id="a2", approved=False, reason="no"),
        ApprovalResponse(tool_call_id="a3", approved=False),
    ]


def test_a_thread_is_one_session_per_caller() -> None:
    assert thread_session_id("t", "alice") == thread_session_id("t", "alice")
    assert thread_session_id("t", "alice") != thread_session_id("t", "bob")


# -- events -------------------------------------------------------------------------------------------------


def test_a_text_run_opens_and_closes_its_step_and_message() -> None:
    t = translator(state={"n": 1})
    events = run_all(t, records(TextDeltaChunk(**base(), content="He"), TextDeltaChunk(**base(), content="llo")))
    events += t.finish()
    assert types(events) == [
        "RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED",
    ]  # fmt: skip
    assert events[1]["snapshot"] == {"n": 1}
    assert events[3]["messageId"] == f"{RUN}-step-1"
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}}


def test_state_patches_before_the_checkpoints_announcement_are_in_its_state() -> None:
    """The snapshot is the checkpoint's state; the patches it holds come before its chunk, later ones after."""
    patch_1 = StatePatchChunk(**base(), patches=[{"op": "add", "path": "/log/-", "value": 1}])
    patch_2 = StatePatchChunk(**base(2), patches=[{"op": "add", "path": "/log/-", "value": 2}])
    chunks = records(patch_1, CheckpointCreatedChunk(**base(), checkpoint_id="cp1", step_count=1), patch_2)
    t = translator(state={"log": [1]}, state_checkpoint="cp1")
    for record in chunks[:2]:
        t.consume_state(record)
    events = run_all(t, chunks[2:])
    assert events[1]["snapshot"] == {"log": [1]}
    assert [e["delta"] for e in events if e["type"] == "STATE_DELTA"] == [patch_2.patches]


def test_patches_before_a_checkpoint_announced_after_the_response_started_are_not_sent_again() -> None:
    """Committed before the response read it, announced after: the patches before the announcement are in it."""
    patch_1 = StatePatchChunk(**base(), patches=[{"op": "add", "path": "/log/-", "value": 1}])
    patch_2 = StatePatchChunk(**base(2), patches=[{"op": "add", "path": "/log/-", "value": 2}])
    chunks = records(patch_1, CheckpointCreatedChunk(**base(), checkpoint_id="cp1", step_count=1), patch_2)
    events = run_all(translator(state={"log": [1]}, state_checkpoint="cp1"), chunks)
    assert events[1]["snapshot"] == {"log": [1]}
    assert [e["delta"] for e in events if e["type"] == "STATE_DELTA"] == [patch_2.patches]


def test_without_a_checkpoint_every_patch_applies_to_the_state_read() -> None:
    patch = StatePatchChunk(**base(), patches=[{"op": "replace", "path": "/n", "value": 2}])
    t = translator(state={"n": 1})
    t.consume_state(records(patch)[0])
    assert t.start()[1]["snapshot"] == {"n": 2}


def test_a_resume_inside_a_message_reopens_it_and_goes_on() -> None:
    chunks = records(
        TextDeltaChunk(**base(), content="Hel"),
        TextDeltaChunk(**base(), content="lo"),
        ToolStartChunk(**base(), tool_call_id="c1", tool_name="note", arguments={"x": 1}),
    )
    t = translator()
    t.consume(chunks[0])
    events = run_all(t, chunks[1:])
    assert types(events) == [
        "RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
    ]  # fmt: skip
    assert events[4]["delta"] == "lo"
    assert events[6]["parentMessageId"] == events[3]["messageId"] == f"{RUN}-step-1"
    assert events[7]["delta"] == '{"x":1}'


def test_a_continuation_after_a_pause_opens_its_own_step() -> None:
    chunks = records(
        ToolStartChunk(**base(), tool_call_id="c1", tool_name="ask", arguments={}),
        RunPausedChunk(**base(), pending_tool_call_ids=["c1"]),
        TextDeltaChunk(**base(2), content="Thanks"),
    )
    t = translator(client_tools=frozenset({"ask"}))
    for record in chunks[:2]:
        t.consume(record)
    events = run_all(t, chunks[2:])  # nothing of step 1 re-opened:
    assert types(events)[2:4] == ["STEP_STARTED", "TEXT_MESSAGE_START"] and events[2]["stepName"] == "step-2"


def test_a_pause_on_client_tools_finishes_with_the_pending_calls() -> None:
    t = translator(client_tools=frozenset({"ask"}))
    pause = RunPausedChunk(**base(), pending_tool_call_ids=["c1"])
    events = run_all(t, records(ToolStartChunk(**base(), tool_call_id="c1", tool_name="ask", arguments={})))
    assert t.finish(pause)[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c1"]}
    # The client posts the result it produced; the run's own record of it is not sent back.
    answered = ToolEndChunk(**base(), tool_call_id="c1", tool_name="ask", result={"a": 1}, success=True)
    assert t.translate(records(answered)[0]) == []
    assert types(events)[-3:] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]


def test_a_pause_on_an_approval_finishes_with_an_interrupt_named_by_the_call() -> None:
    t = translator()
    ask = ToolApprovalRequestChunk(
        **base(), tool_call_id="c1", tool_name="remove", arguments={"p": 1}, arguments_digest="d"
    )
    run_all(t, records(ask))
    outcome = t.finish(RunPausedChunk(**base(), pending_tool_call_ids=["c1"]))[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    assert [(i["id"], i["toolCallId"], i["reason"]) for i in outcome["interrupts"]] == [("c1", "c1", "tool_approval")]
    # Answered (here: refused): the call is not announced again, and its result says what happened.
    start = ToolStartChunk(**base(), tool_call_id="c1", tool_name="remove", arguments={"p": 1})
    denied = ToolEndChunk(**base(), tool_call_id="c1", tool_name="remove", success=False, error=NOT_APPROVED_MESSAGE)
    events = [e for r in records(start, denied) for e in t.translate(r)]
    assert types(events) == ["STEP_STARTED", "TOOL_CALL_RESULT"]
    assert NOT_APPROVED_MESSAGE in events[1]["content"]


def test_a_failed_run_ends_with_run_error_and_a_finished_one_with_its_output() -> None:
    failed = translator()
    run_all(failed, records(ErrorChunk(**base(), error="boom", code="provider_overloaded")))
    assert failed.finish() == [{"type": "RUN_ERROR", "message": "boom", "code": "provider_overloaded"}]
    done = translator()
    run_all(done, records(OutputChunk(**base(), output={"x": 1})))
    assert done.finish()[-1]["result"] == {"x": 1}


def test_a_sub_agents_chunks_are_not_the_threads_events() -> None:
    child = f"{SESSION}-sub-1.1-c1-turn-1"
    chunks = records(
        TextDeltaChunk(**base(agent_id=child), content="child text"),
        StatePatchChunk(**base(agent_id=child), patches=[{"op": "add", "path": "/x", "value": 1}]),
    )
    assert run_all(translator(), chunks)[2:] == []
