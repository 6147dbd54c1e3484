"""Seed 002 types and helpers added for parity (issue 17 item 5): each does what the seed says."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from pydantic import TypeAdapter, ValidationError

from helix_dbos import RetryOptions, RunOutcome, ToolContext
from helix_dbos.attachments import AttachmentAdapter, FileDataAttachment, ImageUrlAttachment
from helix_dbos.errors import HelixError, HelixErrorOptions
from helix_dbos.llm.stop_reason import map_vercel_finish_reason
from helix_dbos.session import (
    AgentState,
    AgentStatus,
    AgentStatusValues,
    ContinueStepOutcome,
    StepOutcome,
    StopStepOutcome,
    SubSessionRef,
    SuspendedAwaitingChildrenOutcome,
    SuspendedChildWait,
    SuspendedStepPartialOutcome,
    get_sub_session_refs_by_type,
)
from helix_dbos.stream.chunks import TextDeltaChunk, is_stream_end
from helix_dbos.tool import AbortSignal


def test_attachments_validate_by_type() -> None:
    image = AttachmentAdapter.validate_python({"type": "image-url", "url": "https://x/a.png"})
    assert image == ImageUrlAttachment(url="https://x/a.png") and image.media_type is None
    data = AttachmentAdapter.validate_python({"type": "file-data", "data": "AAAA", "media_type": "application/pdf"})
    assert isinstance(data, FileDataAttachment)
    assert AttachmentAdapter.dump_python(data) == {"type": "file-data", "data": "AAAA", "media_type": "application/pdf"}
    with pytest.raises(ValidationError):  # data without its media type says nothing about the bytes
        AttachmentAdapter.validate_python({"type": "image-data", "data": "AAAA"})
    with pytest.raises(ValidationError):
        AttachmentAdapter.validate_python({"type": "video-url", "url": "https://x"})


def test_is_stream_end_guards_the_end_message_only() -> None:
    assert is_stream_end({"type": "end"})
    assert not is_stream_end({"type": "text_delta", "content": "x"})
    assert not is_stream_end(TextDeltaChunk(agent_id="r", agent_type="a", content="x"))
    assert not is_stream_end(None) and not is_stream_end("end")


def test_sub_session_refs_by_type() -> None:
    refs = [
        SubSessionRef(sub_session_id=f"s{i}", agent_type=t, parent_tool_call_id=f"c{i}", started_at=i)
        for i, t in enumerate(["researcher", "writer", "researcher"])
    ]
    assert [r.sub_session_id for r in get_sub_session_refs_by_type(refs, "researcher")] == ["s0", "s2"]
    assert get_sub_session_refs_by_type(refs, "nobody") == []


def test_vercel_finish_reasons() -> None:
    assert [map_vercel_finish_reason(r) for r in ("stop", "tool-calls", "length", "content-filter", "error")] == [
        "end_turn",
        "tool_use",
        "max_tokens",
        "content_filter",
        "error",
    ]
    assert map_vercel_finish_reason("other") == map_vercel_finish_reason(None) == "unknown"


def test_step_outcome_and_the_suspension_types() -> None:
    adapter: TypeAdapter[StepOutcome] = TypeAdapter(StepOutcome)
    assert adapter.validate_python({"kind": "continue"}) == ContinueStepOutcome()
    assert adapter.validate_python({"kind": "stop", "reason": "completed"}) == StopStepOutcome(reason="completed")
    wait = SuspendedChildWait(child_session_id="c", parent_tool_call_id="t", spawned_at=1)
    assert wait.model_dump() == {"child_session_id": "c", "parent_tool_call_id": "t", "spawned_at": 1}
    reason = {"kind": "stop", "reason": "suspended_step_partial"}
    assert adapter.validate_python(reason) == StopStepOutcome(reason="suspended_step_partial")


def test_run_outcome_has_the_seeds_seven_kinds() -> None:
    """An exhaustive ``match`` written from seed 002 has no dead arm (two kinds are not produced yet)."""
    members = typing.get_args(typing.get_args(RunOutcome)[0])
    assert SuspendedAwaitingChildrenOutcome in members and SuspendedStepPartialOutcome in members
    kinds = {m.model_fields["kind"].default for m in members}
    assert kinds == {
        "completed",
        "failed",
        "interrupted",
        "aborted",
        "suspended_client_tool",
        "suspended_awaiting_children",
        "suspended_step_partial",
    }
    assert kinds <= set(typing.get_args(AgentStatus)) | {"aborted"}
    constants = {v for k, v in vars(AgentStatusValues).items() if k.isupper()}
    assert {"suspended_awaiting_children", "suspended_step_partial"} <= constants
    state = AgentState(session_id="s", run_id="r", agent_type="a", stream_id="s")
    adapter: TypeAdapter[RunOutcome] = TypeAdapter(RunOutcome)
    waiting = adapter.validate_python(
        {
            "kind": "suspended_awaiting_children",
            "final_state": state.model_dump(),
            "suspended_awaiting_children": {
                "t1": {"child_session_id": "c", "parent_tool_call_id": "t1", "spawned_at": 1}
            },
        }
    )
    assert isinstance(waiting, SuspendedAwaitingChildrenOutcome)
    partial = adapter.validate_python(
        {"kind": "suspended_step_partial", "final_state": state.model_dump(), "suspended_step_id": "step-3"}
    )
    assert isinstance(partial, SuspendedStepPartialOutcome) and partial.suspended_step_id == "step-3"


def test_tool_context_has_the_fields_the_seeds_list() -> None:
    fields = {f.name for f in dataclasses.fields(ToolContext)}
    assert {"agent_id", "agent_type", "abort_signal", "state_tracker"} <= fields
    assert all(callable(getattr(ToolContext, name)) for name in ("get_state", "update_state", "emit"))


def test_retry_options_take_an_abort_signal() -> None:
    signal = AbortSignal()
    assert RetryOptions(abort_signal=signal).abort_signal is signal
    assert RetryOptions().abort_signal is None


def test_helix_error_options_are_the_constructor_keywords() -> None:
    options: HelixErrorOptions = {"code": "provider_overloaded", "retryable": True, "status_code": 503}
    error = HelixError("Provider overloaded", **options)
    assert (error.code, error.category, error.retryable, error.status_code) == (
        "provider_overloaded",
        "provider",
        True,
        503,
    )


def test_create_initial_agent_state_is_an_empty_session() -> None:
    from helix_dbos.orchestration.state_operations import create_initial_agent_state

    state = create_initial_agent_state(session_id="s1", agent_type="writer", custom_state={"notes": []})
    assert (state.session_id, state.run_id, state.stream_id, state.agent_type) == ("s1", "s1", "s1", "writer")
    assert (state.status, state.step_count, state.messages, state.custom_state) == ("running", 0, [], {"notes": []})
    child = create_initial_agent_state(session_id="c", agent_type="w", run_id="c-turn-1", parent_session_id="s1")
    assert (child.run_id, child.parent_session_id) == ("c-turn-1", "s1")
