"""The session store interface: what the runtime needs from durable storage, and nothing more.

The seeds' ``SessionStateStore`` has ~30 methods because several runtimes stage and promote
writes in different ways. The DBOS runtime needs fewer, coarser operations, each one a single
transaction so that a crash can neither lose nor duplicate it:

- :meth:`SessionStore.start_run` - the entry transaction of ``execute`` / ``resume`` / ``retry``:
  create or reopen the session (compare-and-set on its status and version), append the run's input
  messages, and record the run. Exactly one concurrent caller wins.
- :meth:`SessionStore.commit_step` - everything one loop iteration produced (messages, custom
  state, usage, checkpoint, final status) in one commit, idempotent per ``(run_id, step_count)``:
  a re-executed commit after a crash is a no-op that returns the first commit's checkpoint id.

This module holds the records and the protocols (:class:`SessionStore`, :class:`PendingCallStore`,
:class:`WorkerRegistry`) and imports no implementation, so another store can exist:
``helix_dbos.testing.store_contract`` is the suite it would pass. The SQL implementation (PostgreSQL
and SQLite) is :class:`helix_dbos.store.sessions.SqlSessionStore`.

Everything is synchronous: the DBOS runtime calls the store from workflow threads, and the
executor's async API wraps these calls with ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.checkpoint import Checkpoint, CheckpointMeta
from helix_dbos.messages import Message
from helix_dbos.session import (
    AgentState,
    AgentStatus,
    InterruptContext,
    RunStatus,
    SessionStatus,
    SubSessionRef,
)
from helix_dbos.tenancy import DEFAULT_TENANT


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


FORK_METADATA_KEY = "helix_fork"
"""Key of a fork's session ``metadata``: its source ``session_id``, ``checkpoint_id``, and ``fork_checkpoint_id``."""


class SessionRecord(_Data):
    """A session row, without its messages."""

    session_id: str
    agent_type: str
    status: SessionStatus
    version: int
    """Incremented on every write; compare-and-set operations check it."""
    run_id: str | None = None
    """The current (latest) run."""
    stream_id: str
    turn: int = 0
    """Number of runs started in this session (the latest run's turn)."""
    step_count: int = 0
    """LLM steps taken in the current turn."""
    message_count: int = 0
    custom_state: dict[str, Any] = Field(default_factory=dict)
    output: Any = None
    error: str | None = None
    parent_session_id: str | None = None
    root_session_id: str | None = None
    interrupt_requested: bool = False
    interrupt_context: InterruptContext | None = None
    resume_count: int = 0
    aborted: bool = False
    abort_reason: str | None = None
    agent_fingerprint: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: int
    """Milliseconds since the epoch."""
    updated_at: int
    tenant: str = DEFAULT_TENANT
    """Who the session belongs to (:mod:`helix_dbos.tenancy`): set at creation, inherited by children and forks."""

    @property
    def forked_from(self) -> dict[str, Any] | None:
        """Where a fork was branched from (``session_id``, ``checkpoint_id``, ...); ``None`` for an original."""
        source = (self.metadata or {}).get(FORK_METADATA_KEY)
        return dict(source) if isinstance(source, dict) else None


class RunRecord(_Data):
    """One execution within a session (seed 002 "Run Tracking Types")."""

    run_id: str
    session_id: str
    turn: int
    status: RunStatus
    step_count: int = 0
    started_at: int
    completed_at: int | None = None
    error: str | None = None
    start_sequence: int = 0
    """Message count when the run started: its own messages have sequences from here on."""
    stream_start_sequence: int = 0
    """Stream sequence when the run started (readers of one run skip earlier chunks)."""
    workflow_id: str
    mode: Literal["execute", "resume", "retry"] = "execute"
    previous_run_id: str | None = None
    agent_fingerprint: str | None = None
    request_key: str | None = None
    """Identifies the request that started the run; a repeat of it returns this run."""


class PaginatedMessages(_Data):
    """A page of a session's transcript."""

    messages: list[Message]
    total: int
    offset: int
    limit: int
    has_more: bool


class PaginatedCheckpoints(_Data):
    """A page of checkpoint summaries, newest first."""

    items: list[CheckpointMeta]
    total: int
    has_more: bool


class UsageRecord(_Data):
    """What one LLM call, tool call or client wait of a step used (rolled up by ``helix_dbos.usage``).

    Written with the step's commit and keyed by its position in that commit, so a re-executed
    commit (recovery, a lost acknowledgement) can never count it twice.
    """

    kind: Literal["llm", "tool", "client_tool_wait_ms"]
    name: str
    """Model string for ``llm``, tool name otherwise."""
    step: int
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    value: float | None = None
    """Duration in ms: of the model call (``llm``), of the tool's execution (``tool``), or from the
    call's durable registration to its durable answer (``client_tool_wait_ms``)."""
    success: bool = True
    """``False``: an LLM attempt that failed (billed but bought no step), a failed tool call, or a
    client call that timed out."""
    cost_usd: float | None = None
    """``llm``: the call's cost in USD from LiteLLM's cost map; ``None`` when unknown."""


class UsageRow(UsageRecord):
    """A stored :class:`UsageRecord` with the session and run it belongs to (what reads return)."""

    session_id: str
    run_id: str
    created_at: int
    """When the step that recorded it was committed (ms)."""


class CasResult(_Data):
    """Outcome of :meth:`SessionStore.compare_and_set_status`."""

    ok: bool
    new_version: int | None = None
    current_status: SessionStatus | None = None
    current_version: int | None = None


class StartRun(_Data):
    """Everything :meth:`SessionStore.start_run` writes, decided by the caller beforehand."""

    session_id: str
    run_id: str
    workflow_id: str
    agent_type: str
    mode: Literal["execute", "resume", "retry"] = "execute"
    new_session_state: dict[str, Any] | None = None
    """Custom state for a session that does not exist yet; ``None`` means the session must exist."""
    allowed_statuses: list[SessionStatus] = Field(default_factory=lambda: list[SessionStatus](["completed"]))
    """Statuses an existing session may be reopened from (``completed`` for a continuation)."""
    expected_version: int | None = None
    """When set, the reopen fails with ``StaleStateError`` unless the session is at this version."""
    input_messages: list[Message] = Field(default_factory=list)
    """Appended after the existing transcript (after any ``truncate_to``)."""
    truncate_to: int | None = None
    """Retry: drop messages from this sequence on before appending."""
    reset_custom_state: dict[str, Any] | None = None
    """Retry: the custom state to restore (from the checkpoint)."""
    previous_run_id: str | None = None
    request_key: str | None = None
    agent_fingerprint: str | None = None
    parent_session_id: str | None = None
    root_session_id: str | None = None
    stream_id: str | None = None
    """Defaults to the session id: one stream per session, across runs."""
    stream_start_sequence: int = 0
    metadata: dict[str, Any] | None = None
    tenant: str | None = None
    """A new session's tenant; ``None``: its parent's (a child session), else the default tenant."""
    now_ms: int


class TenantSpend(_Data):
    """A tenant's recorded usage over a window (:meth:`SessionStore.tenant_spend`)."""

    cost_usd: float = 0.0
    """Priced calls only (an unpriced call adds nothing)."""
    total_tokens: int = 0
    """Input plus output tokens."""


class StartRunResult(_Data):
    """What :meth:`SessionStore.start_run` did."""

    run: RunRecord
    session: SessionRecord
    """The session as it is after the transaction."""
    created_session: bool
    existing: bool = False
    """True when an identical request (same ``request_key``) was already running: nothing was written."""


class StepCommit(_Data):
    """Everything one loop iteration produced, committed atomically by :meth:`SessionStore.commit_step`."""

    session_id: str
    run_id: str
    step_count: int
    """The step this commit closes (1 for the first LLM step of the run)."""
    first_sequence: int
    """Sequence of the first message in ``messages``; must equal the session's message count."""
    messages: list[Message] = Field(default_factory=list)
    custom_state: dict[str, Any]
    usage: list[UsageRecord] = Field(default_factory=list)
    session_status: SessionStatus | None = None
    """New session status when the run ends with this commit."""
    run_status: RunStatus | None = None
    output: Any = None
    error: str | None = None
    stream_sequence: int = 0
    checkpoint_status: AgentStatus = "running"
    """The status recorded on the checkpoint (and reported by ``CheckpointMeta.status``)."""
    now_ms: int
    applied_tool_call_ids: list[str] = Field(default_factory=list)
    """Pending calls (``PendingCallStore``) whose answers this commit turns into tool results:
    marked ``applied`` in the same transaction, as :meth:`PendingCallStore.mark_applied` would."""


class CommitResult(_Data):
    """Outcome of :meth:`SessionStore.commit_step`."""

    checkpoint_id: str
    applied: bool
    """False when the same step was already committed (a re-executed commit after a crash)."""
    interrupt_requested: bool = False
    """Whether an interrupt is pending for the session (read in the same transaction)."""
    interrupt_reason: str | None = None


class ForkSession(_Data):
    """What :meth:`SessionStore.fork_session` writes: a new session branched from a checkpoint."""

    source_session_id: str
    checkpoint_id: str
    """A checkpoint of the source session (resolved by the caller: "the latest" moves)."""
    new_session_id: str
    status: SessionStatus = "completed"
    """The fork's status: idle, so ``execute`` (``completed``) or ``retry`` (``failed``) continues it."""
    keep_message_count: int | None = None
    """How many of the checkpoint's messages to copy (an edited input drops the last user message and what
    followed it); ``None``: all of them."""
    extra_messages: list[Message] = Field(default_factory=list)
    """Appended after the copied transcript (results closing unanswered calls, an edited user message)."""
    custom_state: dict[str, Any] | None = None
    """The fork's custom state when edited; ``None``: the checkpoint's."""
    provenance: dict[str, Any] = Field(default_factory=dict)
    """More of where the fork came from, recorded in its fork metadata (the source's parent and root, edits)."""
    now_ms: int


class ForkResult(_Data):
    """What :meth:`SessionStore.fork_session` did (or found done by an identical earlier request)."""

    session: SessionRecord
    """The fork as it is now (a repeat returns it with whatever ran in it since)."""
    source_session_id: str
    checkpoint_id: str
    """The source checkpoint the fork was branched from."""
    fork_checkpoint_id: str
    """The fork's own checkpoint at the branch point (``retry`` on the fork starts from it)."""
    created: bool
    """False when the same fork already existed: nothing was written."""

    @property
    def session_id(self) -> str:
        """The fork's session id."""
        return self.session.session_id


# human-in-the-loop and workers ---------------------------------------------------------------------

PendingKind = Literal["client", "approval", "budget", "rerun"]
PendingStatus = Literal["pending", "answered", "expired", "applied", "cancelled"]
Delivery = Literal["hot", "parked"]


class PendingToolCall(_Data):
    """One row: a call waiting for (or holding) a human's answer (see ``helix_dbos.store.hitl``)."""

    session_id: str
    """The session that owns the call: a sub-agent's or companion's when a run in the root's tree asked."""
    tool_call_id: str
    run_id: str
    workflow_id: str
    tool_name: str
    kind: PendingKind
    arguments: dict[str, Any]
    arguments_digest: str
    status: PendingStatus = "pending"
    delivery: Delivery = "hot"
    submission: dict[str, Any] | None = None
    deadline_ms: int | None = None
    created_at: int
    answered_at: int | None = None


class SubmitOutcome(_Data):
    """What :meth:`PendingCallStore.submit` decided."""

    call: PendingToolCall
    delivery: Delivery
    """``hot``: wake the waiting workflow. ``parked``: start the continuation if ``batch_complete``."""
    batch_complete: bool
    """Every call of the run is now answered or expired."""
    session: SessionRecord | None = None
    """The session as the same transaction saw it (``None``: the store did not say)."""
    run: RunRecord | None = None
    """The call's run as the same transaction saw it (``None``: the store did not say)."""


class WorkerRecord(_Data):
    """One worker's heartbeat row (see ``helix_dbos.store.workers``)."""

    executor_id: str
    app_version: str
    hostname: str
    pid: int
    started_at: int
    heartbeat_at: int
    recovered_at: int | None = None
    recovered_by: str | None = None
    process_token: str | None = None
    """Which process holds the id beyond its pid (``helix_dbos.store.process``); ``None``: unknown."""


# protocols ---------------------------------------------------------------------------------------


class PendingCallStore(Protocol):
    """Durable pending tool calls: the source of truth for human-in-the-loop answers.

    Every transition is a compare-and-set on the call's row (``pending`` -> ``answered`` /
    ``expired`` -> ``applied``, or ``cancelled``), so a submission is exactly-once and an answer
    racing the end of the hot window is seen by exactly one side (``helix_dbos.store.hitl``).
    """

    def register(self, calls: list[PendingToolCall], *, fresh: bool = False) -> None:
        """Record calls as pending, idempotently; open ones are handed to the registering run.

        ``fresh``: the calls of a model response the registering run just received. A finished row
        of the same id that another run left, or an ``applied`` one, is an earlier call that used
        the id, and is replaced by the new call; a ``pending`` row is never replaced.
        """
        ...

    def get(self, session_id: str, tool_call_ids: list[str] | None = None) -> list[PendingToolCall]:
        """Rows of the session (optionally only these ids), oldest first."""
        ...

    def get_with_session(
        self, session_id: str, tool_call_ids: list[str]
    ) -> tuple[list[PendingToolCall], SessionRecord | None]:
        """These calls of the session, oldest first, and the session record, in one read."""
        ...

    def open_calls(self, session_id: str) -> list[PendingToolCall]:
        """Calls still waiting for an answer."""
        ...

    def open_calls_in_tree(self, root_session_id: str) -> list[PendingToolCall]:
        """Open calls of the session and of every session under it (sub-agents, companions), oldest first."""
        ...

    def owner_in_tree(self, root_session_id: str, tool_call_id: str) -> str | None:
        """The session of the root's tree (the root included) that owns the call; ``None`` when none does."""
        ...

    def submit(
        self,
        session_id: str,
        tool_call_id: str,
        submission: dict[str, Any],
        check: Callable[[PendingToolCall], None] | None = None,
    ) -> SubmitOutcome:
        """Record an answer exactly once; a second submission raises ``ToolCallAlreadyAnsweredError``.

        ``check`` sees the call's row before anything is written, in the same transaction; an
        exception from it refuses the answer and writes nothing.
        """
        ...

    def park(self, session_id: str, run_id: str) -> list[PendingToolCall]:
        """The end of the hot window: mark unanswered calls parked; return all rows of the run."""
        ...

    def expire(self, session_id: str, tool_call_ids: list[str], now_ms: int) -> list[str]:
        """Expire calls whose deadline passed; return the ids this call expired."""
        ...

    def expired_parked(self, now_ms: int, limit: int = 100) -> list[PendingToolCall]:
        """Parked calls past their deadline (for the deadline sweeper)."""
        ...

    def complete_parked_batches(self, answered_before_ms: int, limit: int = 100) -> list[str]:
        """Sessions to continue: the current run is ``suspended`` and its parked batch has no open call.

        Every call of the run's batch is ``answered`` or ``expired``, the last at or before
        ``answered_before_ms``. The sweep's backstop for an answer that committed while its run was
        parking (after the park, before the suspend), which no submission could continue.
        """
        ...

    def parents_with_children_done(self, limit: int = 100, *, session_id: str | None = None) -> list[str]:
        """Sessions suspended awaiting children that have since ended (a companion; all sub-agent children).

        ``session_id``: only that session (a child's end waking its parent).
        """
        ...

    def children_past_deadline(self, now_ms: int, limit: int = 100) -> list[tuple[str, SubSessionRef]]:
        """Children still ``active`` whose parent's reference is ``running`` past its ``deadline_ms``.

        Each as ``(parent_session_id, ref)``, for the sweep that stops them wherever they were.
        """
        ...

    def mark_applied(self, session_id: str, tool_call_ids: list[str]) -> None:
        """Answers turned into tool results (idempotent)."""
        ...

    def cancel_open(self, session_id: str) -> list[str]:
        """Cancel every open call of the session; return their ids."""
        ...


class WorkerRegistry(Protocol):
    """Worker heartbeats and dead-worker claims (see ``helix_dbos.store.workers``)."""

    def heartbeat(self, executor_id: str, app_version: str, now_ms: int) -> None:
        """Record that ``executor_id`` is alive (and clear an old takeover claim)."""
        ...

    def renew(self, executor_id: str, app_version: str, now_ms: int) -> bool:
        """Write this process's heartbeat if its row still names this process; False if another took the id."""
        ...

    def list_workers(self) -> list[WorkerRecord]:
        """Every known worker."""
        ...

    def claim_dead(self, *, me: str, app_version: str, now_ms: int, dead_after_ms: int) -> list[str]:
        """Claim workers of this app version whose heartbeat is older than ``dead_after_ms``."""
        ...

    def claim(self, executor_id: str, *, app_version: str, now_ms: int, replacing: WorkerRecord | None) -> bool:
        """Take ``executor_id`` for this process if its row is still ``replacing`` (``None``: no row yet).

        A compare-and-set: of two processes that read the same row and both claim it, one wins.
        """
        ...

    def release(self, executor_id: str) -> None:
        """Give ``executor_id`` up at a clean exit, if this process still holds it (its ``pid`` becomes 0)."""
        ...


class SessionStore(Protocol):
    """Durable storage for sessions, transcripts, runs, checkpoints and usage."""

    # lifecycle --------------------------------------------------------------------------------
    def create_session(
        self,
        session_id: str,
        *,
        agent_type: str,
        custom_state: dict[str, Any],
        now_ms: int,
        parent_session_id: str | None = None,
        root_session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> SessionRecord:
        """Create a session in status ``active``, belonging to ``tenant``.

        Concurrent creators: one wins, the rest get :class:`~helix_dbos.errors.SessionAlreadyExistsError`.
        """
        ...

    def session_exists(self, session_id: str) -> bool:
        """Return whether the session exists."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything that belongs to it."""
        ...

    def load_session(self, session_id: str) -> SessionRecord | None:
        """Return the session row, or ``None``."""
        ...

    def load_state(self, session_id: str) -> AgentState | None:
        """Return the session as an :class:`AgentState` with its full transcript, or ``None``."""
        ...

    # messages ---------------------------------------------------------------------------------
    def get_messages(
        self, session_id: str, *, offset: int = 0, limit: int = 50, include_thinking: bool = True
    ) -> PaginatedMessages:
        """Return a page of the transcript, in sequence order."""
        ...

    def get_message_prefix(self, session_id: str, count: int) -> list[Message]:
        """Return the first ``count`` messages (what a run saw when it started)."""
        ...

    def get_message_count(self, session_id: str) -> int:
        """Return the number of messages in the transcript."""
        ...

    def truncate_messages(self, session_id: str, message_count: int) -> None:
        """Drop messages with sequence >= ``message_count`` (retry from a checkpoint)."""
        ...

    # status -----------------------------------------------------------------------------------
    def compare_and_set_status(
        self,
        session_id: str,
        expected_statuses: list[SessionStatus],
        new_status: SessionStatus,
        *,
        expected_version: int | None = None,
        error: str | None = None,
        interrupt_context: InterruptContext | None = None,
    ) -> CasResult:
        """Set the status only if it is one of ``expected_statuses`` (and at ``expected_version``)."""
        ...

    def request_interrupt(self, session_id: str, reason: str | None, *, now_ms: int) -> bool:
        """Durably flag an interrupt for an active session; False when the session is not active."""
        ...

    def clear_interrupt(self, session_id: str) -> None:
        """Clear a pending interrupt flag."""
        ...

    def increment_resume_count(self, session_id: str) -> int:
        """Add one to the session's resume counter and return the new value."""
        ...

    # runs -------------------------------------------------------------------------------------
    def start_run(self, request: StartRun) -> StartRunResult:
        """Run the entry transaction of a run (see the module docstring)."""
        ...

    def commit_step(self, commit: StepCommit) -> CommitResult:
        """Commit one iteration atomically and idempotently (see the module docstring)."""
        ...

    def finish_run(
        self,
        session_id: str,
        run_id: str,
        *,
        session_status: SessionStatus,
        run_status: RunStatus,
        output: Any = None,
        error: str | None = None,
        aborted: bool = False,
        abort_reason: str | None = None,
        interrupt_context: InterruptContext | None = None,
        now_ms: int,
    ) -> None:
        """End a run without a step commit (interrupt before any step, abort, orphan cleanup)."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """One run record."""
        ...

    def get_current_run(self, session_id: str) -> RunRecord | None:
        """Return the most recent run of the session."""
        ...

    def list_runs(self, session_id: str) -> list[RunRecord]:
        """All runs of the session, by turn (turn numbers are contiguous: 1, 2, 3 ...)."""
        ...

    def list_sessions(
        self,
        *,
        status: SessionStatus | None = None,
        limit: int = 50,
        offset: int = 0,
        agent_type: str | None = None,
        tenant: str | None = None,
    ) -> list[SessionRecord]:
        """Sessions, most recently updated first; ``agent_type`` / ``tenant`` keep one agent's / tenant's only."""
        ...

    def tenant_spend(self, tenant: str, *, since_ms: int | None = None) -> TenantSpend:
        """What the tenant's sessions recorded as usage (at or after ``since_ms``; all of it when ``None``)."""
        ...

    def list_running_runs(self, *, after_run_id: str | None = None, limit: int = 500) -> list[RunRecord]:
        """Runs with status ``running`` ordered by run id, after ``after_run_id`` (keyset paging).

        Costs the number of runs in flight, never the number of sessions (orphan detection).
        """
        ...

    # checkpoints ------------------------------------------------------------------------------
    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """Return a checkpoint with its state (the transcript up to its message count)."""
        ...

    def get_latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        """Return the newest checkpoint of the session."""
        ...

    def list_checkpoints(self, session_id: str, *, offset: int = 0, limit: int = 50) -> PaginatedCheckpoints:
        """Checkpoint summaries, newest first."""
        ...

    def fork_session(self, request: ForkSession) -> ForkResult:
        """Branch a new session from a checkpoint of another, in one transaction.

        The fork gets its own copy of the transcript up to the checkpoint (plus ``extra_messages``),
        the checkpoint's custom state, output and error, its own stream id (its session id), one
        checkpoint of its own at the branch point, and no runs, usage, pending calls or child
        refs: nothing it shares with the source can change under either. The source is not written.

        Idempotent by ``new_session_id``: when that session already is a fork of the same source
        checkpoint, it is returned with ``created=False``. Raises :class:`SessionNotFoundError`
        (no source), :class:`CheckpointNotFoundError` (not a checkpoint of the source) or
        :class:`ForkConflictError` (``new_session_id`` is another session).
        """
        ...

    # sub-sessions and usage ---------------------------------------------------------------------
    def add_sub_session_refs(self, session_id: str, refs: list[SubSessionRef]) -> None:
        """Record child sessions."""
        ...

    def update_sub_session_ref(
        self, session_id: str, sub_session_id: str, *, status: str, completed_at: int | None = None
    ) -> None:
        """Update a child session's status."""
        ...

    def get_sub_session_refs(self, session_id: str) -> list[SubSessionRef]:
        """Return the session's child references."""
        ...

    def update_remote_progress(
        self, session_id: str, sub_session_id: str, *, run_id: str | None = None, last_sequence: int | None = None
    ) -> None:
        """Record a remote child's run id and the last remote stream sequence proxied (never moving it back)."""
        ...

    def get_usage(
        self, session_id: str, *, run_id: str | None = None, include_children: bool = False
    ) -> list[UsageRow]:
        """Usage records of the session (or of one run), in commit order.

        With ``include_children`` also those of its child sessions (``parent_session_id``), at any depth.
        """
        ...

    @property
    def pending(self) -> PendingCallStore:
        """Pending client-executed and approval-gated tool calls."""
        ...

    @property
    def workers(self) -> WorkerRegistry:
        """Worker heartbeats."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
