"""Request and response bodies of the HTTP service.

Request bodies reject unknown fields (``extra="forbid"``): a misspelt ``sesion_id`` must be a 422,
not a silently new session. Inputs reuse the library's own models (``AgentInput``,
``UserInputMessage``, the ``SubmitToolResult`` union), so the HTTP API accepts exactly what the
executor does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from helix_dbos.double_text import DoubleTextPolicy, DoubleTextReceipt
from helix_dbos.messages import UserInputMessage
from helix_dbos.session import AgentInput, RunStatus, SessionStatus
from helix_dbos.stream.base import StreamStatus
from helix_dbos.usage import UsageSummary

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"
"""Session ids appear in URLs and DBOS workflow ids: letters, digits and ``._:-``, at most 200."""

SessionId = Annotated[str, Field(pattern=SESSION_ID_PATTERN, description="Letters, digits and `._:-`; 200 at most.")]
AgentName = Annotated[str, Field(min_length=1, max_length=200)]
Reason = Annotated[str, Field(max_length=2000)]
Priority = Annotated[
    int,
    Field(
        ge=1, le=2**31 - 1, description="Order in a queued backlog: lower runs first (no priority runs first of all)."
    ),
]
SendMessage = str | list[UserInputMessage]
"""A follow-up message: text, or structured user messages (with metadata and files)."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartRunRequest(_Request):
    """``POST /v1/runs``: start a run of ``agent`` (a new session, or the next turn of a completed one)."""

    agent: AgentName
    input: str | AgentInput
    """Text, or ``{message, state?, messages?}`` (``state`` overrides the state schema's defaults)."""
    session_id: SessionId | None = None
    """Continue this session (it must be ``completed``), or create it under this id; default: a new id."""
    idempotency_key: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """A repeat of the request with the same key returns the same run, even after it finished."""
    priority: Priority | None = None
    double_text: DoubleTextPolicy | None = None
    """What the message does if the session's run is still in flight: ``reject`` (409
    ``state_already_running``), ``enqueue``, ``interrupt``, ``rollback`` or ``steer``; default: the agent's
    policy. See ``docs/double-texting.md``."""


class ResumeRequest(_Request):
    """``POST /v1/sessions/{id}/resume``: continue an interrupted or suspended session in a new run."""

    agent: AgentName | None = None
    """Defaults to the session's agent; when given it must be the session's agent."""
    message: SendMessage | None = None
    """Appended to the transcript before the run continues."""
    priority: Priority | None = None


class RetryRequest(_Request):
    """``POST /v1/sessions/{id}/retry``: start again from a checkpoint, discarding what followed it."""

    checkpoint_id: Annotated[str, Field(min_length=1, max_length=400)] | None = None
    """Default: the latest checkpoint."""
    message: SendMessage | None = None
    priority: Priority | None = None


class ForkRequest(_Request):
    """``POST /v1/sessions/{id}/fork``: branch a new session from a checkpoint of this one.

    ``state`` and ``state_patch`` exclude each other, and the schema says so (``not`` both
    required), so a client generated from it never sends a body the route must refuse.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={"not": {"required": ["state", "state_patch"]}})

    checkpoint_id: Annotated[str, Field(min_length=1, max_length=400)] | None = None
    """Default: the latest checkpoint (refused while a run is in flight: name one then)."""
    new_session_id: SessionId | None = None
    """The fork's id; a repeat with the same id answers with the same fork. Default: a new id."""
    message: Annotated[str, Field(min_length=1)] | None = None
    """Edited input: replaces the checkpoint's last user message (and what followed it), or is added."""
    message_mode: Literal["replace", "append"] = "replace"
    """``replace`` the last user message at the checkpoint, or ``append`` after it."""
    state: dict[str, Any] | None = None
    """Edited custom state: replaces the checkpoint's."""
    state_patch: dict[str, Any] | None = None
    """Edited custom state: a JSON merge patch (RFC 7396) over the checkpoint's (``null`` deletes a key)."""

    @model_validator(mode="after")
    def _one_state_edit(self) -> ForkRequest:
        if {"state", "state_patch"} <= self.model_fields_set:
            raise ValueError("give state (a replacement) or state_patch (a merge patch), not both")
        return self


class InterruptRequest(_Request):
    """``POST .../interrupt``: ask the run to stop cleanly at its next step (it stays resumable)."""

    reason: Reason | None = None


class AbortRequest(_Request):
    """``POST .../abort``: stop the run now; the session ends ``failed`` and is not resumable."""

    reason: Reason | None = None


class ChatRequest(_Request):
    """``POST /v1/chat``: send a chat message: a new session, or the next turn of a completed one."""

    agent: AgentName
    message: SendMessage
    session_id: SessionId | None = None
    double_text: DoubleTextPolicy | None = None
    """What the message does if the session's run is still in flight: ``reject`` (409
    ``state_already_running``), ``enqueue``, ``interrupt``, ``rollback`` or ``steer``; default: the agent's
    policy. See ``docs/double-texting.md``."""


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunAccepted(_Response):
    """A run was started (or an identical request's run was found)."""

    session_id: str
    run_id: str
    status: RunStatus
    """The run's status when the response was written (usually ``running``)."""
    stream_url: str
    """Where to read the session's chunks (SSE)."""
    double_text: DoubleTextReceipt | None = None
    """What became of the message: ``started`` now, or ``queued`` / ``steering`` behind the run in flight,
    with the run that carries it (``run_id``) and its place in the session's line."""


class ForkView(_Response):
    """A fork: a new, idle session branched from a checkpoint of another."""

    session_id: str
    """The fork's session id: continue it with ``POST /v1/runs`` (``session_id``) or ``.../retry``."""
    created: bool
    """False when an identical earlier request made this fork (nothing was written)."""
    source_session_id: str
    checkpoint_id: str
    """The source's checkpoint the fork branched from."""
    fork_checkpoint_id: str
    """The fork's own checkpoint at the branch point."""
    status: SessionStatus
    """``completed`` (continue with a new message, or retry), or ``failed`` (retry)."""
    step_count: int
    message_count: int


class ChatAccepted(_Response):
    """A chat turn was started."""

    session_id: str
    run_id: str
    stream_url: str
    """The chat stream of the session, which starts at this run's first chunk."""
    double_text: DoubleTextReceipt | None = None
    """What became of the message: ``started`` now, or ``queued`` / ``steering`` behind the run in flight,
    with the run that carries it (``run_id``) and its place in the session's line."""


class RunView(_Response):
    """One run of a session."""

    run_id: str
    turn: int
    status: RunStatus
    mode: Literal["execute", "resume", "retry"]
    step_count: int
    started_at: int
    """Milliseconds since the epoch."""
    completed_at: int | None = None
    error: str | None = None
    previous_run_id: str | None = None
    stream_start_sequence: int
    """The stream's sequence when the run started: the run's own chunks come after it."""


class PendingToolCallView(_Response):
    """A call waiting for the client: run it, decide on it, or allow the run to spend more.

    ``client``: run the tool; ``approval``: decide on the call; ``budget``: the run reached its
    budget (``arguments`` say which limit, what was used and the raise an approval grants);
    ``rerun``: a not-retry-safe call's worker died while it ran, and its outcome is unknown: approve
    running it once more, or deny (the model is told the outcome is unknown).
    """

    tool_call_id: str
    session_id: str
    """The session that owns the call: this one, or a sub-agent's or companion's under it. Answer it
    through this session (``POST /v1/sessions/{id}/tool-results``); the answer is routed to the owner."""
    tool_name: str
    kind: Literal["client", "approval", "budget", "rerun"]
    """``client``: answer with ``client-tool-result``; the others with ``approval-response``."""
    arguments: dict[str, Any]
    arguments_digest: str
    """Echo it in an ``approval-response`` to bind the decision to exactly these arguments."""
    deadline_ms: int | None = None
    """When the call times out (milliseconds since the epoch), if the tool has a timeout."""
    created_at: int


class StreamView(_Response):
    """The session stream's state (the seeds' ``ResumableStreamStatus``: ``ended``, not ``completed``)."""

    status: StreamStatus
    latest_sequence: int
    """The highest chunk sequence so far: an SSE client that saw it has seen everything."""


class CanResumeView(_Response):
    """Whether ``resume`` would accept the session, and why not."""

    can_resume: bool
    reason: str | None = None


class SessionSnapshot(_Response):
    """``GET /v1/sessions/{id}``: everything a front end needs to render a session and decide what to do."""

    session_id: str
    agent: str
    status: SessionStatus
    """The session's stored status: ``active`` while a run is in flight or waiting for the client."""
    turn: int
    step_count: int
    """LLM steps taken in the current turn."""
    message_count: int
    output: Any = None
    error: str | None = None
    aborted: bool = False
    interrupt_requested: bool = False
    current_run: RunView | None = None
    pending_tool_calls: list[PendingToolCallView]
    awaiting_client_tool: bool = False
    """The run waits for the result of a client-executed tool (a ``client`` pending call): what a
    remote parent reads to fail its delegation at once (``client-tool-unsupported``), never hang."""
    can_resume: CanResumeView
    stream: StreamView | None = None
    """``None`` when this server has no stream for the session."""
    usage: UsageSummary
    """What the session has used and cost: every run, and its sub-agents' sessions."""
    created_at: int
    updated_at: int


class RunResultView(_Response):
    """``GET /v1/sessions/{id}/result``: the current run's ``AgentResult``."""

    session_id: str
    run_id: str
    status: str
    """``completed``, ``failed``, ``interrupted``, ``suspended_client_tool`` or ``suspended_awaiting_children``."""
    output: Any = None
    error: str | None = None
    suspended: dict[str, Any] | None = None
    """While suspended: ``{"tool_call_ids": [...]}`` to answer, or (``suspended_awaiting_children``)
    ``{"children": [{"child_session_id", "parent_tool_call_id", "spawned_at"}]}``, the companions whose
    human calls the session lists in ``pending_tool_calls``."""
    aborted: bool = False
    """The run was aborted (``status`` is then ``failed``); not resumable."""
    abort_reason: str | None = None
    """The reason given to ``abort``, if any."""


class InterruptAccepted(_Response):
    """The interrupt flag was written (``requested``), or there was no run in flight to interrupt."""

    session_id: str
    requested: bool


class AbortAccepted(_Response):
    """The session's run was aborted."""

    session_id: str
    status: Literal["failed"] = "failed"


class ToolResultAccepted(_Response):
    """The submission was recorded, exactly once."""

    session_id: str
    tool_call_id: str
    run_id: str | None = None
    """The run that will use the answer: the waiting run, or the continuation this submission started;
    ``None`` while other calls of the batch still wait for their answers."""


class HealthView(_Response):
    """``GET /healthz``."""

    status: Literal["ok"] = "ok"


__all__ = [
    "SESSION_ID_PATTERN",
    "AbortAccepted",
    "AbortRequest",
    "CanResumeView",
    "ChatAccepted",
    "ChatRequest",
    "ForkRequest",
    "ForkView",
    "HealthView",
    "InterruptAccepted",
    "InterruptRequest",
    "PendingToolCallView",
    "ResumeRequest",
    "RetryRequest",
    "RunAccepted",
    "RunResultView",
    "RunView",
    "SessionSnapshot",
    "StartRunRequest",
    "StreamView",
    "ToolResultAccepted",
]
