"""``RunReads``: what the service, the CLI and handles read about sessions and runs.

Every read goes to the store (plain queries, no DBOS, no workflow running here), so a process that
only serves reads or starts runs on a queue can use it. It is the one read API of the client
(:mod:`.client`): the service and the CLI ask it instead of the store, so the store stays the
runtime's (an architecture test keeps them apart).
"""

from __future__ import annotations

from helix_dbos.checkpoint import Checkpoint
from helix_dbos.errors import SessionNotFoundError
from helix_dbos.messages import Message
from helix_dbos.session import AgentState, CanResumeResult, SessionStatus
from helix_dbos.store.base import (
    PaginatedCheckpoints,
    PaginatedMessages,
    PendingToolCall,
    RunRecord,
    SessionRecord,
    SessionStore,
    UsageRow,
)
from helix_dbos.store.conversation import can_resume_session
from helix_dbos.store.usage_tree import usage_with_children
from helix_dbos.usage import UsageSummary, summarize_usage

__all__ = ["RunReads"]


class RunReads:
    """Reads of sessions, runs, transcripts, checkpoints, pending calls and usage."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    # -- sessions ----------------------------------------------------------------------------------------
    def get_session(self, session_id: str) -> SessionRecord | None:
        """The session's store record (status, turn, abort and interrupt details), without messages."""
        return self._store.load_session(session_id)

    def require_session(self, session_id: str) -> SessionRecord:
        """The session's record; :class:`SessionNotFoundError` when there is none."""
        session = self._store.load_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    def list_sessions(
        self,
        *,
        status: SessionStatus | None = None,
        agent_type: str | None = None,
        limit: int = 50,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[SessionRecord]:
        """Sessions, most recently updated first (``tenant``'s only, when given)."""
        return self._store.list_sessions(
            status=status, agent_type=agent_type, limit=limit, offset=offset, tenant=tenant
        )

    def get_state(self, session_id: str) -> AgentState | None:
        """The session's state with its full transcript.

        While tool calls wait for a client or an approval, ``status`` is ``suspended_client_tool``
        (the session itself stays ``active`` in the store, as the seeds say).
        """
        state = self._store.load_state(session_id)
        if state is not None and state.status == "running" and self._store.pending.open_calls(session_id):
            state = state.model_copy(update={"status": "suspended_client_tool"})
        return state

    def get_messages(self, session_id: str, *, offset: int = 0, limit: int = 50) -> PaginatedMessages:
        """A page of the session's transcript."""
        return self._store.get_messages(session_id, offset=offset, limit=limit)

    def get_message_prefix(self, session_id: str, count: int) -> list[Message]:
        """The session's first ``count`` messages."""
        return self._store.get_message_prefix(session_id, count)

    def can_resume(self, session_id: str) -> CanResumeResult:
        """Whether ``resume`` would accept the session, with the reason when not."""
        return can_resume_session(self._store.load_session(session_id), self._store.get_current_run(session_id))

    # -- runs --------------------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> RunRecord | None:
        """A run by its id (which is its workflow id)."""
        return self._store.get_run(run_id)

    def get_current_run(self, session_id: str) -> RunRecord | None:
        """The session's most recent run record."""
        return self._store.get_current_run(session_id)

    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Every run of the session, by turn."""
        return self._store.list_runs(session_id)

    def list_running_runs(self, *, after_run_id: str | None = None, limit: int = 500) -> list[RunRecord]:
        """A page of the runs in flight, by run id (page on with the last one's id)."""
        return self._store.list_running_runs(after_run_id=after_run_id, limit=limit)

    # -- checkpoints and pending calls -------------------------------------------------------------------
    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """A checkpoint by its id (in any session)."""
        return self._store.get_checkpoint(checkpoint_id)

    def get_latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        """The session's newest checkpoint, whole (state included); ``None`` before its first step commits."""
        return self._store.get_latest_checkpoint(session_id)

    def list_checkpoints(self, session_id: str, *, offset: int = 0, limit: int = 50) -> PaginatedCheckpoints:
        """The session's checkpoints, newest first: the points ``fork`` can branch from."""
        return self._store.list_checkpoints(session_id, offset=offset, limit=limit)

    def list_pending_tool_calls(self, session_id: str) -> list[PendingToolCall]:
        """Tool calls still waiting for a client result or an approval, oldest first.

        The session's own and those of every session under it (its sub-agents and companions, at any
        depth), each with its owning ``session_id``: a client answers them all through this session
        (``submit_tool_result`` routes each answer to its owner).
        """
        return self._store.pending.open_calls_in_tree(session_id)

    # -- usage -------------------------------------------------------------------------------------------
    def get_usage(
        self, session_id: str, *, run_id: str | None = None, include_children: bool = False
    ) -> list[UsageRow]:
        """The session's usage records (or one run's), with its children's when ``include_children``.

        Children are sub-agents and companions, recursively; with ``run_id``, those that run
        started: so a parent run's cost includes what it delegated.
        """
        if include_children:
            return usage_with_children(self._store, session_id, run_id=run_id)
        return self._store.get_usage(session_id, run_id=run_id)

    def get_usage_summary(
        self, session_id: str, run_id: str | None = None, *, include_children: bool = True
    ) -> UsageSummary:
        """What a session (with its sub-agents' sessions) or one of its runs used and cost."""
        return summarize_usage(self.get_usage(session_id, run_id=run_id, include_children=include_children))
