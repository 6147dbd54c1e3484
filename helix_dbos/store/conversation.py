"""Recovery helpers (seed 002 "Recovery"): a run's conversation, and whether it can be resumed.

The seeds key these by ``run_id``; helix-dbos keeps the transcript per session, so a run id is
resolved to its session first, and the conversation is that session's transcript (what ``resume``
or a later ``execute`` continues from). :func:`can_resume_session` is the one decision behind
``executor.can_resume`` too, so the helper and the executor never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from helix_dbos.errors import SessionNotFoundError
from helix_dbos.messages import Message
from helix_dbos.session import CanResumeResult
from helix_dbos.store.base import RunRecord, SessionRecord, SessionStore


@dataclass(frozen=True)
class RecoveredConversation:
    """What :func:`recover_conversation` returns (the seeds' ``{ messages, canResume }``)."""

    messages: list[Message]
    can_resume: bool
    reason: str | None = None
    """Why the conversation cannot be resumed (``None`` when it can)."""
    session_id: str = ""


def can_resume_session(session: SessionRecord | None, current_run: RunRecord | None) -> CanResumeResult:
    """Whether ``resume`` would accept a session in this state, with the reason when not (pure)."""
    if session is None:
        return CanResumeResult(can_resume=False, reason="session not found")
    if session.status == "interrupted":
        return CanResumeResult(can_resume=True)
    if session.status == "active" and current_run is not None and current_run.status == "suspended":
        return CanResumeResult(can_resume=True)
    if session.status == "active":
        return CanResumeResult(can_resume=False, reason="a run is in flight")
    if session.status == "completed":
        return CanResumeResult(can_resume=False, reason="completed: continue it with execute()")
    if session.aborted:
        return CanResumeResult(can_resume=False, reason="aborted runs are not resumable")
    return CanResumeResult(can_resume=False, reason=f"status {session.status!r}: use retry()")


def _session_of(state_store: SessionStore, run_id: str) -> str:
    run = state_store.get_run(run_id)
    if run is None:
        raise SessionNotFoundError(run_id)
    return run.session_id


def load_conversation_messages(state_store: SessionStore, run_id: str) -> list[Message]:
    """The transcript of the session ``run_id`` belongs to, in order.

    Raises :class:`SessionNotFoundError` for an unknown run.
    """
    session_id = _session_of(state_store, run_id)
    return state_store.get_message_prefix(session_id, state_store.get_message_count(session_id))


def recover_conversation(*, state_store: SessionStore, run_id: str) -> RecoveredConversation:
    """The conversation of ``run_id`` and whether its session can be resumed (seed 002 ``recoverConversation``)."""
    session_id = _session_of(state_store, run_id)
    decision = can_resume_session(state_store.load_session(session_id), state_store.get_current_run(session_id))
    return RecoveredConversation(
        messages=load_conversation_messages(state_store, run_id),
        can_resume=decision.can_resume,
        reason=decision.reason,
        session_id=session_id,
    )


__all__ = ["RecoveredConversation", "can_resume_session", "load_conversation_messages", "recover_conversation"]
