"""What starting a run writes and what its workflow receives: pure builders, no I/O.

A run start is one store write (:class:`StartRun`: open or continue the session, append its input,
record the run) and then the workflow input (:class:`RunRequest`, built from what the store
returned). The executor does the I/O around them; keeping the shapes here means the contract of
each kind of start (first turn, next turn, resume, retry) reads in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from helix_dbos.agent import AgentConfig, AgentHooks
from helix_dbos.messages import Message
from helix_dbos.orchestration.message_builder import heal_unpaired_finish
from helix_dbos.orchestration.state_operations import default_custom_state, input_messages
from helix_dbos.runtime.hooks import defined_hooks
from helix_dbos.runtime.ids import continuation_request_key, workflow_id_for
from helix_dbos.runtime.run_request import RunRequest
from helix_dbos.session import AgentInput, SessionStatus
from helix_dbos.store.base import RunRecord, SessionRecord, StartRun


def first_turn(
    config: AgentConfig,
    session_id: str,
    parsed: AgentInput,
    *,
    request_key: str,
    fingerprint: str | None,
    stream_start_sequence: int,
    now_ms: int,
) -> StartRun:
    """Open a new session with its first run."""
    return StartRun(
        session_id=session_id,
        run_id=workflow_id_for(session_id, 1),
        workflow_id=workflow_id_for(session_id, 1),
        agent_type=config.name,
        new_session_state=default_custom_state(config, parsed.state),
        stream_start_sequence=stream_start_sequence,
        input_messages=[*(parsed.messages or []), *input_messages(parsed.message)],
        request_key=request_key,
        agent_fingerprint=fingerprint,
        now_ms=now_ms,
    )


def child_first_turn(
    config: AgentConfig,
    session_id: str,
    message: str,
    *,
    parent_session_id: str,
    root_session_id: str,
    request_key: str,
    fingerprint: str | None,
    metadata: dict[str, Any] | None,
    now_ms: int,
) -> StartRun:
    """Open a child agent's session (a sub-agent or companion) with its first run.

    The child's stream is its own session's; its chunks are mirrored to the parent's by the child
    run itself (``RunRequest.parent_stream_id``). A new session has no stream yet, so the run's
    chunks start at sequence 0.
    """
    return StartRun(
        session_id=session_id,
        run_id=workflow_id_for(session_id, 1),
        workflow_id=workflow_id_for(session_id, 1),
        agent_type=config.name,
        new_session_state=default_custom_state(config),
        input_messages=input_messages(message),
        request_key=request_key,
        agent_fingerprint=fingerprint,
        parent_session_id=parent_session_id,
        root_session_id=root_session_id,
        metadata=metadata,
        now_ms=now_ms,
    )


def next_turn(
    config: AgentConfig,
    existing: SessionRecord,
    parsed: AgentInput,
    history: Sequence[Message],
    *,
    request_key: str,
    fingerprint: str | None,
    stream_start_sequence: int,
    now_ms: int,
) -> StartRun:
    """Continue a ``completed`` session with its next turn (``history`` is its transcript)."""
    turn = existing.turn + 1
    heal: list[Message] = list(heal_unpaired_finish(list(history)))
    return StartRun(
        session_id=existing.session_id,
        run_id=workflow_id_for(existing.session_id, turn),
        workflow_id=workflow_id_for(existing.session_id, turn),
        agent_type=config.name,
        allowed_statuses=["completed"],
        expected_version=existing.version,
        input_messages=[*heal, *input_messages(parsed.message)],
        previous_run_id=existing.run_id,
        stream_start_sequence=stream_start_sequence,
        request_key=request_key,
        agent_fingerprint=fingerprint,
        now_ms=now_ms,
    )


def continuation(
    config: AgentConfig,
    session: SessionRecord,
    *,
    mode: Literal["resume", "retry"],
    extra: list[Message],
    truncate_to: int | None,
    reset_state: dict[str, Any] | None,
    fingerprint: str | None,
    stream_start_sequence: int,
    now_ms: int,
) -> StartRun:
    """Resume an interrupted or suspended session, or retry one from a checkpoint, in a new run.

    A retry's ``extra`` input goes into the transcript with the start; a resume's is given to the
    workflow instead (:func:`run_request`), which appends it once the outstanding batch is answered.
    """
    turn = session.turn + 1
    workflow_id = workflow_id_for(session.session_id, turn)
    allowed: list[SessionStatus] = (
        ["interrupted", "active"] if mode == "resume" else ["failed", "interrupted", "completed"]
    )
    return StartRun(
        session_id=session.session_id,
        run_id=workflow_id,
        workflow_id=workflow_id,
        agent_type=config.name,
        mode=mode,
        allowed_statuses=allowed,
        expected_version=session.version,
        input_messages=extra if mode == "retry" else [],
        truncate_to=truncate_to,
        reset_custom_state=reset_state,
        previous_run_id=session.run_id,
        request_key=continuation_request_key(mode, turn),
        agent_fingerprint=fingerprint,
        stream_start_sequence=stream_start_sequence,
        now_ms=now_ms,
    )


def run_request(
    agent: AgentConfig,
    run: RunRecord,
    session: SessionRecord,
    hooks: AgentHooks | None,
    resume_messages: list[Message] | None = None,
    *,
    executor_hooks: AgentHooks | None = None,
) -> RunRequest:
    """The workflow input of a started run (ids, and the session as the start left it)."""
    return RunRequest(
        session_id=run.session_id,
        run_id=run.run_id,
        workflow_id=run.workflow_id,
        agent_name=agent.name,
        turn=run.turn,
        mode=run.mode,
        stream_id=session.stream_id,
        start_message_count=session.message_count,
        start_custom_state=session.custom_state,
        previous_run_id=run.previous_run_id,
        fingerprint=run.agent_fingerprint,
        resume_messages=resume_messages or [],
        stream_start_sequence=run.stream_start_sequence,
        hook_names=defined_hooks([h for h in (executor_hooks, agent.hooks, hooks) if h is not None]),
        budget=agent.budget,
    )


def child_run_request(
    agent: AgentConfig,
    run: RunRecord,
    session: SessionRecord,
    *,
    parent_session_id: str,
    parent_stream_id: str,
    root_session_id: str,
    mode: Literal["ephemeral", "persistent"],
    executor_hooks: AgentHooks | None = None,
) -> RunRequest:
    """The workflow input of a child run: a run's input plus where it mirrors its chunks."""
    return run_request(agent, run, session, None, executor_hooks=executor_hooks).model_copy(
        update={
            "parent_session_id": parent_session_id,
            "parent_stream_id": parent_stream_id,
            "root_session_id": root_session_id,
            "child_mode": mode,
        }
    )


__all__ = ["child_first_turn", "child_run_request", "continuation", "first_turn", "next_turn", "run_request"]
