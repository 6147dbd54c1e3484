"""What the model saw at one step of a session: the compacted view beside the transcript.

Compaction never rewrites the transcript (see :mod:`helix_dbos.compaction`): what the model was sent
instead is rebuilt from the transcript and the recorded ``CompactionState``. An operator debugging a
long session needs both side by side (the transcript says what happened, the view says what the
model knew), so the Python read and ``GET /v1/sessions/{id}/model-view?run_id=...&step=N`` both come
from :func:`model_view`.

Where a step's view comes from:

- step ``N``'s model call saw the transcript as the checkpoint before step ``N``'s left it (step 0
  is written when a run starts, with the user's message, so that checkpoint always exists);
- the compaction in effect at that call is the last ``{agent}.compaction.compact`` the run recorded
  for a transcript no longer than that one, else the one the run inherited from the previous run
  (its first ``{agent}.compaction.check`` output): the same rule the loop follows, read back from
  DBOS's record of the run's steps.

The system prompt is not part of the transcript and is left out; everything else is what the loop
passed the adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from dbos import DBOS
from pydantic import BaseModel, ConfigDict

from helix_dbos.compaction.view import CompactionState, applies_to, compacted_view
from helix_dbos.errors import CheckpointNotFoundError
from helix_dbos.messages import Message, SystemMessage, ToolResultMessage
from helix_dbos.runtime.reads import RunReads

__all__ = ["ModelView", "ModelViewMessage", "TranscriptMark", "build_model_view", "model_view", "state_at"]

TranscriptMark = Literal["seen", "dropped", "cleared", "kept_system"]
"""What became of a transcript message in the model's view."""


class ModelViewMessage(BaseModel):
    """One message the model was sent."""

    model_config = ConfigDict(extra="forbid")

    message: dict[str, Any]
    """The message as it was sent (the wire form of :class:`~helix_dbos.messages.Message`)."""
    kind: Literal["message", "summary", "cleared_tool_result"]
    """``summary``: the compaction's summary, not a transcript message; ``cleared_tool_result``: a
    tool result whose content the model saw replaced by a placeholder."""
    transcript_index: int | None
    """The transcript message it shows (``None`` for the summary)."""


class ModelView(BaseModel):
    """What the model saw at one step, and what became of each transcript message."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    step: int
    run_id: str
    compacted: bool
    """Whether a compaction was in effect (else the model saw the transcript as it is)."""
    compaction: dict[str, Any] | None
    """The recorded ``CompactionState`` in effect (cut, cleared_until, summary, reason...)."""
    messages: list[ModelViewMessage]
    """What the model was sent after its system prompt, in order."""
    transcript_length: int
    """How many transcript messages existed when the model was called."""
    transcript_marks: list[TranscriptMark]
    """One per transcript message ``[0, transcript_length)``: seen verbatim, dropped (summarised or
    just gone), cleared (its tool result replaced) or a dropped system message kept."""


def build_model_view(
    session_id: str, step: int, run_id: str, transcript: Sequence[Message], state: CompactionState | None
) -> ModelView:
    """The view of ``transcript`` under ``state`` (pure)."""
    state = applies_to(state, len(transcript))
    sent = compacted_view(transcript, len(transcript), state)
    cut = state.cut if state is not None else 0
    cleared_until = state.cleared_until if state is not None else 0
    marks: list[TranscriptMark] = []
    for index, message in enumerate(transcript):
        if index < cut:
            marks.append("kept_system" if isinstance(message, SystemMessage) else "dropped")
        elif isinstance(message, ToolResultMessage) and index < cleared_until:
            marks.append("cleared")
        else:
            marks.append("seen")
    kept_system = [i for i in range(cut) if marks[i] == "kept_system"]
    indices: list[int | None] = list(kept_system)
    if state is not None and state.summary:
        indices.append(None)
    indices.extend(range(cut, len(transcript)))
    messages = []
    for position, message in zip(indices, sent, strict=True):
        kind: Literal["message", "summary", "cleared_tool_result"] = "message"
        if position is None:
            kind = "summary"
        elif marks[position] == "cleared":
            kind = "cleared_tool_result"
        messages.append(ModelViewMessage(message=message.model_dump(mode="json"), kind=kind, transcript_index=position))
    return ModelView(
        session_id=session_id,
        step=step,
        run_id=run_id,
        compacted=state is not None,
        compaction=None if state is None else state.model_dump(mode="json"),
        messages=messages,
        transcript_length=len(transcript),
        transcript_marks=marks,
    )


def state_at(run_steps: Sequence[dict[str, Any]], transcript_length: int) -> CompactionState | None:
    """The compaction in effect at a model call over ``transcript_length`` messages (pure).

    ``run_steps``: the run's recorded steps (``DBOS.list_workflow_steps``), oldest first.
    """
    state: CompactionState | None = None
    for recorded in run_steps:
        name = str(recorded.get("function_name") or "")
        output = recorded.get("output")
        if not isinstance(output, dict):
            continue
        if name.endswith(".compaction.check") and output.get("inherited") is not None and state is None:
            state = CompactionState.model_validate(output["inherited"])
        elif name.endswith(".compaction.compact") and isinstance(output.get("state"), dict):
            made = CompactionState.model_validate(output["state"])
            if made.transcript_length > transcript_length:
                break  # made for a later call of the run
            state = made
    return state


def model_view(reads: RunReads, session_id: str, run_id: str, step: int) -> ModelView:
    """What the model saw at ``step`` of run ``run_id`` of ``session_id`` (``executor.reads``).

    Steps are numbered per run, as the timeline numbers them (step 0 is the run's start, 1 its first
    model call). Raises :class:`~helix_dbos.errors.SessionNotFoundError` for an unknown session and
    :class:`~helix_dbos.errors.CheckpointNotFoundError` for a step that made no model call (step 0,
    or one the run has not committed). Reads DBOS's record of the run's steps, so it needs DBOS
    launched in this process (an executor, or the service).
    """
    reads.require_session(session_id)
    checkpoints = {
        c.step_count: c for c in reads.list_checkpoints(session_id, limit=100_000).items if c.run_id == run_id
    }
    if step < 1 or step not in checkpoints or step - 1 not in checkpoints:
        raise CheckpointNotFoundError(session_id, f"step {step} of run {run_id}")
    transcript = reads.get_message_prefix(session_id, checkpoints[step - 1].message_count)
    recorded = [dict(s) for s in DBOS.list_workflow_steps(run_id)]
    state = state_at(recorded, len(transcript))
    return build_model_view(session_id, step, run_id, transcript, state)
