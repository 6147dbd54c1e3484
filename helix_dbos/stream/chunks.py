"""Stream chunks: the events an agent run emits while it executes (seed 002 "Stream Types").

Every chunk is a pydantic model discriminated by ``type`` and carries the emitting agent's
``agent_id`` / ``agent_type``, so one session stream can interleave a parent and its sub-agents.
``step`` tags a chunk with the step that produced it: after a crash, ``cleanup_to_step`` removes the
chunks of steps that never committed (see :mod:`helix_dbos.stream.base`).

Chunks are validated and serialised through one ``TypeAdapter`` (:data:`StreamChunkAdapter`), so the
same JSON goes over SSE, into a stream store, and back::

    chunk = TextDeltaChunk(agent_id="s1", agent_type="writer", content="Hi")
    assert chunk_from_json(chunk_to_json(chunk)) == chunk

Where each chunk comes from (seed 004 "Stream Event Flow"): model text -> ``text_delta``; reasoning ->
``thinking``; a tool call -> ``tool_start`` ... ``tool_end`` (with ``state_patch`` and ``custom``
from inside the tool); a sub-agent call -> ``subagent_start`` ... ``subagent_end``; failures ->
``error``; structured output -> ``output``. The remaining types mark run lifecycle and recovery.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal, TypeGuard, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

__all__ = [
    "STREAM_CHUNK_TYPES",
    "CheckpointCreatedChunk",
    "CustomEventChunk",
    "ErrorChunk",
    "ExecutorSupersededChunk",
    "OutputChunk",
    "RunInterruptedChunk",
    "RunPausedChunk",
    "RunResumedChunk",
    "StatePatchChunk",
    "StepCommittedChunk",
    "StepDiscardedChunk",
    "StreamChunk",
    "StreamChunkAdapter",
    "StreamResyncChunk",
    "SubAgentEndChunk",
    "SubAgentStartChunk",
    "TextDeltaChunk",
    "ThinkingChunk",
    "ToolApprovalRequestChunk",
    "ToolEndChunk",
    "ToolStartChunk",
    "canonical_arguments_digest",
    "chunk_from_json",
    "chunk_to_json",
    "is_checkpoint_created_chunk",
    "is_custom_event_chunk",
    "is_error_chunk",
    "is_executor_superseded_chunk",
    "is_output_chunk",
    "is_run_interrupted_chunk",
    "is_run_paused_chunk",
    "is_run_resumed_chunk",
    "is_state_patch_chunk",
    "is_step_committed_chunk",
    "is_step_discarded_chunk",
    "is_stream_end",
    "is_stream_resync_chunk",
    "is_sub_agent_end_chunk",
    "is_sub_agent_start_chunk",
    "is_text_delta_chunk",
    "is_thinking_chunk",
    "is_tool_approval_request_chunk",
    "is_tool_end_chunk",
    "is_tool_start_chunk",
]


class _BaseChunk(BaseModel):
    """Fields every chunk carries; unknown fields are rejected so typos fail loudly."""

    model_config = ConfigDict(extra="forbid")

    type: str
    """The discriminator; each chunk class narrows it to one literal (declared here so it dumps first)."""
    agent_id: str
    """Session id of the agent that emitted the chunk (a sub-agent's own session id for its chunks)."""
    agent_type: str
    """Name of the emitting agent's definition."""
    step: int | None = None
    """Step that produced the chunk; ``cleanup_to_step`` removes chunks of uncommitted steps by it."""
    timestamp: int | None = None
    """When the chunk was emitted, in milliseconds since the Unix epoch."""


class TextDeltaChunk(_BaseChunk):
    """A piece of the model's text answer, streamed token by token."""

    type: Literal["text_delta"] = "text_delta"
    content: str
    """The new text; concatenate the deltas of a step to get its full text."""


class ThinkingChunk(_BaseChunk):
    """A piece of the model's reasoning trace."""

    type: Literal["thinking"] = "thinking"
    content: str
    """The new reasoning text."""
    is_complete: bool = False
    """True on the chunk that ends the reasoning block."""


class ToolStartChunk(_BaseChunk):
    """A tool call is about to execute."""

    type: Literal["tool_start"] = "tool_start"
    tool_call_id: str
    """The provider's tool-call id; the matching ``tool_end`` carries the same id."""
    tool_name: str
    arguments: dict[str, Any]
    """Parsed arguments the tool is called with."""


class ToolEndChunk(_BaseChunk):
    """A tool call finished, with its result or its error."""

    type: Literal["tool_end"] = "tool_end"
    tool_call_id: str
    tool_name: str
    result: Any = None
    """The tool's JSON-able result (``None`` when it failed)."""
    error: str | None = None
    """The error message when the tool failed."""
    success: bool = True
    """False when the tool raised; ``error`` then says why."""


class ToolApprovalRequestChunk(_BaseChunk):
    """An approval-gated tool call is waiting for a human decision.

    ``arguments_digest`` binds an approval to the exact arguments shown to the approver: compute it
    with :func:`canonical_arguments_digest` and compare on the way back, so arguments cannot change
    between the request and the decision.
    """

    type: Literal["tool_approval_request"] = "tool_approval_request"
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    """The arguments the approver is asked to approve."""
    arguments_digest: str
    """SHA-256 hex digest of the canonical JSON of ``arguments``."""
    deadline: int | None = None
    """When the request expires, in milliseconds since the Unix epoch; ``None`` for no deadline."""


class SubAgentStartChunk(_BaseChunk):
    """A sub-agent run is starting, on behalf of a parent's tool call."""

    type: Literal["subagent_start"] = "subagent_start"
    sub_agent_id: str
    """The child's session id."""
    sub_agent_type: str
    """Name of the child's agent definition."""
    tool_call_id: str
    """The parent's tool call that started the child."""
    input: Any = None
    """The input the child was started with."""


class SubAgentEndChunk(_BaseChunk):
    """A sub-agent run finished, with its result or its error."""

    type: Literal["subagent_end"] = "subagent_end"
    sub_agent_id: str
    """The child's session id."""
    sub_agent_type: str
    tool_call_id: str
    """The parent's tool call that started the child."""
    result: Any = None
    """The child's output (``None`` when it failed)."""
    error: str | None = None
    """The child's error message when it failed."""


class CustomEventChunk(_BaseChunk):
    """An application-defined event, emitted by a tool through its context."""

    type: Literal["custom"] = "custom"
    event_name: str
    data: Any = None
    """JSON-able payload of the event."""


class StatePatchChunk(_BaseChunk):
    """Changes to the agent's custom state, as RFC 6902 JSON Patch operations."""

    type: Literal["state_patch"] = "state_patch"
    patches: list[dict[str, Any]]
    """The operations, in order (``{"op": "replace", "path": "/count", "value": 2}``)."""


class ErrorChunk(_BaseChunk):
    """An error during the run; ``recoverable`` says whether the run continues."""

    type: Literal["error"] = "error"
    error: str
    """Human-readable message."""
    code: str | None = None
    """The ``HelixError`` code, when the error has one."""
    recoverable: bool = False
    """True when the run goes on after the error (for example a failed tool the model can retry)."""


class OutputChunk(_BaseChunk):
    """The run's structured output."""

    type: Literal["output"] = "output"
    output: Any
    """The output value; required, though it may be ``None``."""


class RunInterruptedChunk(_BaseChunk):
    """The run was interrupted (soft stop at a step boundary); it can be resumed."""

    type: Literal["run_interrupted"] = "run_interrupted"
    reason: str | None = None


class RunResumedChunk(_BaseChunk):
    """A suspended or interrupted run resumed."""

    type: Literal["run_resumed"] = "run_resumed"
    run_id: str | None = None
    """The run that continues the session."""
    previous_run_id: str | None = None
    """The suspended run; equal to ``run_id`` when the resume continues the same run (DBOS)."""


class RunPausedChunk(_BaseChunk):
    """The run paused to wait for outside input (tool approval, client-executed tool results)."""

    type: Literal["run_paused"] = "run_paused"
    reason: str | None = None
    pending_tool_call_ids: list[str] = Field(default_factory=list)
    """Tool calls whose results or approvals the run waits for."""


class CheckpointCreatedChunk(_BaseChunk):
    """A checkpoint of the session was saved."""

    type: Literal["checkpoint_created"] = "checkpoint_created"
    checkpoint_id: str
    step_count: int
    """Steps completed when the checkpoint was taken."""


class ExecutorSupersededChunk(_BaseChunk):
    """Another executor took over the session; this one stops emitting."""

    type: Literal["executor_superseded"] = "executor_superseded"


class StepCommittedChunk(_BaseChunk):
    """A step's changes were committed to the session store."""

    type: Literal["step_committed"] = "step_committed"
    step_count: int
    """The step that was committed."""


class StepDiscardedChunk(_BaseChunk):
    """A step's staged changes were thrown away (crash, interrupt); its chunks are void."""

    type: Literal["step_discarded"] = "step_discarded"
    step_count: int
    """The step that was discarded."""
    reason: str | None = None


class StreamResyncChunk(_BaseChunk):
    """The stream was rebuilt from a checkpoint; clients should refresh their view from it."""

    type: Literal["stream_resync"] = "stream_resync"
    checkpoint_id: str
    """Checkpoint that was restored."""
    step_count: int
    """Step count at the checkpoint."""
    message_count: int
    """Message count at the checkpoint."""
    from_sequence: int
    """Stream sequence at the checkpoint; chunks after it were replaced."""
    reason: Literal["crash_recovery", "rollback", "branch"]


StreamChunk = Annotated[
    TextDeltaChunk
    | ThinkingChunk
    | ToolStartChunk
    | ToolEndChunk
    | ToolApprovalRequestChunk
    | SubAgentStartChunk
    | SubAgentEndChunk
    | CustomEventChunk
    | StatePatchChunk
    | ErrorChunk
    | OutputChunk
    | RunInterruptedChunk
    | RunResumedChunk
    | RunPausedChunk
    | CheckpointCreatedChunk
    | ExecutorSupersededChunk
    | StepCommittedChunk
    | StepDiscardedChunk
    | StreamResyncChunk,
    Field(discriminator="type"),
]
"""Any stream chunk, discriminated by ``type``."""

StreamChunkAdapter: TypeAdapter[StreamChunk] = TypeAdapter(StreamChunk)
"""Validates and serialises one chunk; the single source of the chunk wire format."""

STREAM_CHUNK_TYPES: frozenset[str] = frozenset(
    get_args(member.model_fields["type"].annotation)[0] for member in get_args(get_args(StreamChunk)[0])
)
"""Every chunk ``type`` value, derived from the union so it cannot drift from it."""


def chunk_to_json(chunk: StreamChunk) -> str:
    r"""Serialise a chunk to JSON text.

    ``None`` fields are kept: dropping them would lose a required ``OutputChunk.output`` of ``None``.
    Text with a lone surrogate (a provider's ``"\\ud800"`` escape decodes to one) cannot be encoded
    as UTF-8; it is written as the same JSON escape, which is what ``JSON.stringify`` does.
    """
    try:
        return StreamChunkAdapter.dump_json(chunk).decode()
    except PydanticSerializationError:
        return json.dumps(StreamChunkAdapter.dump_python(chunk, mode="python"), separators=(",", ":"), default=str)


def chunk_from_json(text: str | bytes) -> StreamChunk:
    """Parse and validate a chunk from JSON text; raises ``pydantic.ValidationError`` on bad input.

    Accepts what :func:`chunk_to_json` writes, lone-surrogate escapes included (the fast parser
    refuses those, the standard library's does not).
    """
    try:
        return StreamChunkAdapter.validate_json(text)
    except ValidationError as exc:
        if not any(e["type"] == "json_invalid" for e in exc.errors()):
            raise
        try:
            data = json.loads(text)
        except ValueError:
            raise exc from None
        return StreamChunkAdapter.validate_python(data)


def canonical_arguments_digest(arguments: Any) -> str:
    """SHA-256 hex digest of ``arguments`` as canonical JSON (sorted keys, no spaces, UTF-8).

    Key order and whitespace do not change the digest, so the same arguments hash the same wherever
    they were serialised; any change of a value does.
    """
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def is_text_delta_chunk(chunk: object) -> TypeGuard[TextDeltaChunk]:
    """Return whether ``chunk`` is a ``text_delta`` chunk."""
    return isinstance(chunk, TextDeltaChunk)


def is_thinking_chunk(chunk: object) -> TypeGuard[ThinkingChunk]:
    """Return whether ``chunk`` is a ``thinking`` chunk."""
    return isinstance(chunk, ThinkingChunk)


def is_tool_start_chunk(chunk: object) -> TypeGuard[ToolStartChunk]:
    """Return whether ``chunk`` is a ``tool_start`` chunk."""
    return isinstance(chunk, ToolStartChunk)


def is_tool_end_chunk(chunk: object) -> TypeGuard[ToolEndChunk]:
    """Return whether ``chunk`` is a ``tool_end`` chunk."""
    return isinstance(chunk, ToolEndChunk)


def is_tool_approval_request_chunk(chunk: object) -> TypeGuard[ToolApprovalRequestChunk]:
    """Return whether ``chunk`` is a ``tool_approval_request`` chunk."""
    return isinstance(chunk, ToolApprovalRequestChunk)


def is_sub_agent_start_chunk(chunk: object) -> TypeGuard[SubAgentStartChunk]:
    """Return whether ``chunk`` is a ``subagent_start`` chunk."""
    return isinstance(chunk, SubAgentStartChunk)


def is_sub_agent_end_chunk(chunk: object) -> TypeGuard[SubAgentEndChunk]:
    """Return whether ``chunk`` is a ``subagent_end`` chunk."""
    return isinstance(chunk, SubAgentEndChunk)


def is_custom_event_chunk(chunk: object) -> TypeGuard[CustomEventChunk]:
    """Return whether ``chunk`` is a ``custom`` chunk."""
    return isinstance(chunk, CustomEventChunk)


def is_state_patch_chunk(chunk: object) -> TypeGuard[StatePatchChunk]:
    """Return whether ``chunk`` is a ``state_patch`` chunk."""
    return isinstance(chunk, StatePatchChunk)


def is_error_chunk(chunk: object) -> TypeGuard[ErrorChunk]:
    """Return whether ``chunk`` is an ``error`` chunk."""
    return isinstance(chunk, ErrorChunk)


def is_output_chunk(chunk: object) -> TypeGuard[OutputChunk]:
    """Return whether ``chunk`` is an ``output`` chunk."""
    return isinstance(chunk, OutputChunk)


def is_run_interrupted_chunk(chunk: object) -> TypeGuard[RunInterruptedChunk]:
    """Return whether ``chunk`` is a ``run_interrupted`` chunk."""
    return isinstance(chunk, RunInterruptedChunk)


def is_run_resumed_chunk(chunk: object) -> TypeGuard[RunResumedChunk]:
    """Return whether ``chunk`` is a ``run_resumed`` chunk."""
    return isinstance(chunk, RunResumedChunk)


def is_run_paused_chunk(chunk: object) -> TypeGuard[RunPausedChunk]:
    """Return whether ``chunk`` is a ``run_paused`` chunk."""
    return isinstance(chunk, RunPausedChunk)


def is_checkpoint_created_chunk(chunk: object) -> TypeGuard[CheckpointCreatedChunk]:
    """Return whether ``chunk`` is a ``checkpoint_created`` chunk."""
    return isinstance(chunk, CheckpointCreatedChunk)


def is_executor_superseded_chunk(chunk: object) -> TypeGuard[ExecutorSupersededChunk]:
    """Return whether ``chunk`` is an ``executor_superseded`` chunk."""
    return isinstance(chunk, ExecutorSupersededChunk)


def is_step_committed_chunk(chunk: object) -> TypeGuard[StepCommittedChunk]:
    """Return whether ``chunk`` is a ``step_committed`` chunk."""
    return isinstance(chunk, StepCommittedChunk)


def is_step_discarded_chunk(chunk: object) -> TypeGuard[StepDiscardedChunk]:
    """Return whether ``chunk`` is a ``step_discarded`` chunk."""
    return isinstance(chunk, StepDiscardedChunk)


def is_stream_resync_chunk(chunk: object) -> TypeGuard[StreamResyncChunk]:
    """Return whether ``chunk`` is a ``stream_resync`` chunk."""
    return isinstance(chunk, StreamResyncChunk)


def is_stream_end(value: object) -> bool:
    """Whether ``value`` is the seeds' end-of-stream message (``{"type": "end"}``), not a chunk.

    helix-dbos's readers simply stop iterating when a stream ends, so Python code rarely needs this
    guard; it exists for code that consumes the seeds' wire messages (a chunk, or the end marker)
    as data, where the chunk union has no ``end`` member.
    """
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind == "end"
