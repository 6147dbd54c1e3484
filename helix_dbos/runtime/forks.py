"""Forking a session: a new session branched from any checkpoint of another (the seeds' branching).

The seeds name branching among what checkpoints are for, and give it a ``stream_resync`` chunk with
``reason: 'branch'``; the rest of the contract is decided here:

- **What the fork holds.** Its own copy of the transcript up to the checkpoint, the checkpoint's
  custom state (and output or error), its own stream, one checkpoint of its own at the branch point,
  and no runs, usage, pending calls or child refs. Nothing it shares with the source can change
  under either: the store copies rows (``helix_dbos.store.fork``).
- **Its status is idle.** ``completed`` (continue it with ``execute``, or replay the step after the
  checkpoint with ``retry``), or ``failed`` when the checkpoint recorded the run's failure
  (``retry`` continues it). A call the checkpoint left waiting for a client or an approval is
  closed with a tool error in the fork: the wait stays with the source.
- **Its stream** starts with a ``stream_resync`` chunk (``reason: "branch"``) and is ended, so a
  reader attached to the fork learns where it came from and is not left waiting.
- **Idempotent by ``new_session_id``.** A repeat returns the same fork (``created`` False), whatever
  ran in it since; an id taken by any other session is a :class:`ForkConflictError`.
- **Edits** (:mod:`helix_dbos.orchestration.fork_edits`): a replaced or added user message, a
  replaced or merge-patched custom state. With an edited message the fork's transcript ends with it,
  so ``retry`` on the fork runs the model on the edited input ("time travel").
- **Any session forks, a child too.** A sub-agent's (``{parent}-sub-{call}``) or a companion's
  (``{root}-agent-{name}``) fork is a standalone session: no parent, no root, so nothing of the
  source's tree (its parent's child refs, pending calls, stream mirroring) reaches or waits for it.
  Its fork metadata records the source's ``parent_session_id`` and ``root_session_id``.
- **A run in flight on the source** does not stop a fork from a named checkpoint: a checkpoint never
  changes once written. Without a checkpoint id such a session is refused
  (:class:`AgentAlreadyRunningError`), since "the latest" would be whichever step committed last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from helix_dbos._clock import now_ms
from helix_dbos.errors import (
    AgentAlreadyRunningError,
    CheckpointNotFoundError,
    ForkConflictError,
    ForkEditError,
    SessionNotFoundError,
)
from helix_dbos.orchestration.fork_edits import ForkEdits, check_edits, edited_state, edited_transcript
from helix_dbos.orchestration.message_builder import close_unpaired_for_fork
from helix_dbos.runtime.ids import new_session_id as fresh_session_id
from helix_dbos.runtime.streaming import RunStreams
from helix_dbos.session import SessionStatus
from helix_dbos.store.base import ForkResult, ForkSession, SessionStore
from helix_dbos.stream.chunks import StreamResyncChunk
from helix_dbos.validation import check_text

__all__ = ["fork_session"]


def fork_session(
    store: SessionStore,
    streams: RunStreams,
    session_id: str,
    checkpoint_id: str | None = None,
    *,
    new_session_id: str | None = None,
    edits: ForkEdits | None = None,
    state_schema_of: Callable[[str], type[BaseModel] | None] | None = None,
) -> ForkResult:
    """Branch a new session from ``checkpoint_id`` of ``session_id`` (the latest by default), edited.

    ``state_schema_of`` names the state schema of an agent type, when the caller knows its agents:
    an edited state that does not fit it is refused here rather than failing the fork's first run.
    """
    edits = edits or ForkEdits()
    check_text(
        session_id=session_id,
        checkpoint_id=checkpoint_id,
        new_session_id=new_session_id,
        message=edits.message,
        state=edits.state,
        state_patch=edits.state_patch,
    )
    check_edits(edits)
    target = new_session_id or fresh_session_id()
    repeat = _repeat(store, target, session_id, checkpoint_id, edits)
    if repeat is not None:
        _open_stream(streams, repeat)
        return repeat
    source = store.load_session(session_id)
    if source is None:
        raise SessionNotFoundError(session_id)
    if checkpoint_id is None:
        if source.status == "active":
            raise AgentAlreadyRunningError(
                session_id, source.status, "name the checkpoint to fork from (--checkpoint), or wait for it to finish"
            )
        checkpoint = store.get_latest_checkpoint(session_id)
    else:
        checkpoint = store.get_checkpoint(checkpoint_id)
    if checkpoint is None or checkpoint.session_id != session_id:
        raise CheckpointNotFoundError(session_id, checkpoint_id)
    status: SessionStatus = "failed" if checkpoint.state.status == "failed" else "completed"
    kept, edited_messages = edited_transcript(checkpoint.state.messages, edits)
    custom_state = edited_state(checkpoint.state.custom_state, edits)
    schema = state_schema_of(source.agent_type) if state_schema_of is not None else None
    if custom_state is not None and schema is not None:
        try:
            schema.model_validate(custom_state)
        except ValidationError as exc:
            raise ForkEditError(f"the edited state does not fit {source.agent_type}'s state schema: {exc}") from None
    closing = close_unpaired_for_fork(checkpoint.state.messages[:kept])
    result = store.fork_session(
        ForkSession(
            source_session_id=session_id,
            checkpoint_id=checkpoint.id,
            new_session_id=target,
            status=status,
            keep_message_count=kept,
            extra_messages=[*closing, *edited_messages],
            custom_state=custom_state,
            provenance=_provenance(source.parent_session_id, source.root_session_id, edits),
            now_ms=now_ms(),
        )
    )
    _open_stream(streams, result)
    return result


def _provenance(parent_session_id: str | None, root_session_id: str | None, edits: ForkEdits) -> dict[str, Any]:
    """What the fork's metadata adds to its source ids: the source's place in its tree, and the edits."""
    provenance: dict[str, Any] = {}
    if parent_session_id is not None:
        provenance["source_parent_session_id"] = parent_session_id
    if root_session_id is not None:
        provenance["source_root_session_id"] = root_session_id
    if not edits.is_empty():
        provenance["edits"] = edits.recorded()
    return provenance


def _repeat(
    store: SessionStore, target: str, session_id: str, checkpoint_id: str | None, edits: ForkEdits
) -> ForkResult | None:
    """The fork an identical earlier request made, or ``None`` when ``target`` is free."""
    existing = store.load_session(target)
    if existing is None:
        return None
    source = existing.forked_from
    if (
        source is None
        or source.get("session_id") != session_id
        or (checkpoint_id is not None and source.get("checkpoint_id") != checkpoint_id)
        or source.get("edits", {}) != edits.recorded()
    ):
        raise ForkConflictError(target, "that session exists and is not this fork (source, checkpoint, edits)")
    return ForkResult(
        session=existing,
        source_session_id=session_id,
        checkpoint_id=str(source.get("checkpoint_id")),
        fork_checkpoint_id=str(source.get("fork_checkpoint_id", "")),
        created=False,
    )


def _open_stream(streams: RunStreams, fork: ForkResult) -> None:
    """Give a fork that never ran its stream: the branch's ``stream_resync``, then the end.

    Also on a repeat, so a fork whose process died between the store write and this one still gets
    its stream; the chunk's dedupe key keeps it to one.
    """
    session = fork.session
    if session.turn != 0 or streams.latest_sequence(session.stream_id) != 0:
        return
    streams.open(session.stream_id, session.session_id, session.agent_type)
    chunk = StreamResyncChunk(
        agent_id=session.session_id,
        agent_type=session.agent_type,
        checkpoint_id=fork.checkpoint_id,
        step_count=session.step_count,
        message_count=session.message_count,
        from_sequence=0,
        reason="branch",
    )
    streams.write(session.stream_id, chunk, dedupe_key=f"fork:{session.session_id}")
    streams.end(session.stream_id)
