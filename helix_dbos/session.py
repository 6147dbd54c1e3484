"""Session and run data: statuses, ``AgentState``, ``AgentResult`` and run inputs (seed 002 "State Types").

A *session* is the conversation container (messages, custom state, checkpoints) keyed by
``session_id``; a *run* is one execution within it (``execute``, ``resume``, ``retry``), keyed by
``run_id``. Three status vocabularies exist because three audiences read them: the store
(``SessionStatus``: ``active`` ...), the runtime (``AgentStatus``: ``running`` ...), and streams
(``ended``, not ``completed``). The conversion helpers keep them in step.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from helix_dbos.messages import Message, UserInputMessage
from helix_dbos.tool import AbortSignal
from helix_dbos.usage import UsageSummary

SessionStatus = Literal["active", "completed", "failed", "interrupted", "paused"]
"""Status as stored on the session."""

AgentStatus = Literal[
    "running",
    "completed",
    "failed",
    "paused",
    "waiting_tool",
    "interrupted",
    "suspended_client_tool",
    "suspended_awaiting_children",
    "suspended_step_partial",
]
"""Status as the runtime and ``AgentResult`` report it."""

RunStatus = Literal["running", "completed", "failed", "interrupted", "suspended"]
"""Status of one run record."""


class AgentStatusValues:
    """Named constants for :data:`AgentStatus` (the seeds' ``AgentStatusValues``)."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    PAUSED = "paused"
    WAITING_TOOL = "waiting_tool"
    INTERRUPTED = "interrupted"
    SUSPENDED_CLIENT_TOOL = "suspended_client_tool"
    SUSPENDED_AWAITING_CHILDREN = "suspended_awaiting_children"
    """In the seeds' vocabulary; helix-dbos does not produce it yet (see :data:`RunOutcome`)."""
    SUSPENDED_STEP_PARTIAL = "suspended_step_partial"
    """In the seeds' vocabulary; helix-dbos does not produce it yet (see :data:`RunOutcome`)."""


class SubSessionStatusValues:
    """Named constants for sub-session (child agent) statuses."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


def session_status_to_agent_status(status: SessionStatus) -> AgentStatus:
    """Storage -> runtime: ``active`` is ``running``; the rest keep their names."""
    return "running" if status == "active" else status


def agent_status_to_session_status(status: AgentStatus) -> SessionStatus:
    """Runtime -> storage: every in-flight or waiting status is ``active`` on the session."""
    if status in ("completed", "failed", "interrupted", "paused"):
        return status
    return "active"


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RemoteSessionInfo(_Data):
    """Where a remote sub-agent's session lives (``SubSessionRef.remote``)."""

    url: str
    """The remote service (``RemoteAgentTransport.describe()``)."""
    agent: str
    """The agent's name on the remote service."""
    run_id: str | None = None
    """The remote run the parent started (or re-attached to)."""
    last_sequence: int = 0
    """The last remote stream sequence proxied into the parent's stream: where a recovered parent resumes."""


class SubSessionRef(_Data):
    """A parent's reference to a child agent session (local, or on a remote service: ``remote``)."""

    sub_session_id: str
    agent_type: str
    parent_tool_call_id: str
    status: Literal["running", "completed", "failed"] = "running"
    started_at: int
    completed_at: int | None = None
    mode: Literal["ephemeral", "persistent"] = "ephemeral"
    name: str | None = None
    remote: RemoteSessionInfo | None = None
    """Set for a remote sub-agent's session (the seeds' remote metadata)."""
    deadline_ms: int | None = None
    """helix-dbos: when the parent's call gives up on the child (the tool's ``timeout_ms`` after its
    start); the workers' sweep stops a child still running then, wherever it was."""


class InterruptContext(_Data):
    """Why and where a run was interrupted."""

    reason: str | None = None
    pending_tool_call_id: str | None = None
    pending_tool_name: str | None = None
    step_count: int
    timestamp: int


class AgentState(_Data):
    """The full state of a session as a run sees it (used for execution and checkpoints)."""

    session_id: str
    run_id: str
    agent_type: str
    stream_id: str
    status: AgentStatus = "running"
    step_count: int = 0
    custom_state: dict[str, Any] = Field(default_factory=dict)
    messages: list[Message] = Field(default_factory=list)
    output: Any = None
    error: str | None = None
    parent_session_id: str | None = None
    sub_session_refs: list[SubSessionRef] = Field(default_factory=list)
    aborted: bool = False
    abort_reason: str | None = None


class AgentResult(_Data):
    """What a finished (or suspended) run reports."""

    status: AgentStatus
    output: Any = None
    """The validated output (structured-output agents) or the final text (plain agents)."""
    error: str | None = None
    suspended: dict[str, Any] | None = None
    """Routing info while suspended, e.g. ``{"tool_call_ids": [...]}``."""
    usage: UsageSummary | None = None
    """What the run used and cost: tokens by kind, USD, LLM and tool calls, durations (a helix-dbos
    addition; ``None`` when the result did not come from a store that records usage)."""


class AgentInput(_Data):
    """Structured input to ``execute``: a message (or several) plus optional state and history."""

    message: str | list[UserInputMessage]
    state: dict[str, Any] | None = None
    """Overrides applied on top of the state schema's defaults for a new session."""
    messages: list[Message] | None = None
    """External conversation history to seed a new session with."""


class ClientToolResult(_Data):
    """The front end's result for a client-executed tool (``kind="client-tool-result"``).

    ``result`` or ``error``, not both: an answer carrying both is ambiguous, and is refused rather
    than letting one silently win.
    """

    model_config = ConfigDict(
        json_schema_extra={"not": {"required": ["result", "error"], "properties": {"error": {"type": "string"}}}}
    )

    kind: Literal["client-tool-result"] = "client-tool-result"
    tool_call_id: str
    result: Any = None
    error: str | None = None
    """Set when the client failed to run the tool; the model sees it as a tool error."""

    @model_validator(mode="after")
    def _result_or_error(self) -> ClientToolResult:
        if self.error is not None and "result" in self.model_fields_set:
            raise ValueError("give either result or error, not both")
        return self


class ApprovalResponse(_Data):
    """A user's decision on an approval-gated tool call (``kind="approval-response"``)."""

    kind: Literal["approval-response"] = "approval-response"
    tool_call_id: str
    approved: bool
    reason: str | None = None
    arguments_digest: str | None = None
    """The digest from the ``tool_approval_request`` chunk; when given, the decision only applies if
    the call's arguments still hash to it (an approval is bound to exactly what was shown)."""


SubmitToolResult = Annotated[ClientToolResult | ApprovalResponse, Field(discriminator="kind")]
"""What ``submit_tool_result`` accepts."""

SubmitToolResultAdapter: TypeAdapter[SubmitToolResult] = TypeAdapter(SubmitToolResult)


class RetryOptions(_Data):
    """Options of ``retry`` (seed 002 ``RetryOptions``).

    The seeds' ``usage_store`` has no counterpart here because on DBOS it is always on: every run,
    a retried one included, records its usage in the session store under its own run id, with the
    step commits. ``handle.usage()`` on the handle ``retry`` returns is the retried run's;
    ``handle.session_usage()`` keeps the abandoned run's billed usage in the session's total.
    """

    checkpoint_id: str | None = None
    """The checkpoint to restore; the latest by default. An unknown id is an error, never a fallback."""
    message: str | list[UserInputMessage] | None = None
    """A message to continue with after the restored checkpoint."""
    abort_signal: AbortSignal | None = None
    """Trips an ``abort`` of the retried run when the caller aborts this signal (``handle.retry``)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class ResumeOptions(_Data):
    """Options of ``resume``."""

    message: str | list[UserInputMessage] | None = None
    """A message appended once any outstanding tool batch has its results."""


class _OutcomeBase(_Data):
    final_state: AgentState


class CompletedOutcome(_OutcomeBase):
    """The run completed."""

    kind: Literal["completed"] = "completed"
    output: Any = None


class FailedOutcome(_OutcomeBase):
    """The run failed."""

    kind: Literal["failed"] = "failed"
    error: str


class InterruptedOutcome(_OutcomeBase):
    """The run stopped at an interrupt; ``resume`` continues it."""

    kind: Literal["interrupted"] = "interrupted"
    reason: str | None = None


class AbortedOutcome(_OutcomeBase):
    """The run was aborted; not resumable."""

    kind: Literal["aborted"] = "aborted"
    reason: str | None = None


class SuspendedClientToolOutcome(_OutcomeBase):
    """The run parked waiting for client results or approvals, keyed by tool-call id."""

    kind: Literal["suspended_client_tool"] = "suspended_client_tool"
    pending_client_tool_calls: dict[str, dict[str, Any]]


class SuspendedChildWait(_Data):
    """A parent durably blocked on a sub-agent child (seed 002 ``SuspendedChildWait``), by tool-call id.

    Filled when a parent's blocking companion waits on a human, or a sub-agent child is still running
    when the parent's hot window ends: the parent parks as ``suspended_awaiting_children``
    (``AgentResult.suspended["children"]``, as JSON).
    """

    child_session_id: str
    parent_tool_call_id: str
    spawned_at: int


class SuspendedAwaitingChildrenOutcome(_OutcomeBase):
    """The seeds' ``suspended_awaiting_children``: a blocking companion waits on a human; the parent parked."""

    kind: Literal["suspended_awaiting_children"] = "suspended_awaiting_children"
    suspended_awaiting_children: dict[str, SuspendedChildWait]


class SuspendedStepPartialOutcome(_OutcomeBase):
    """The seeds' ``suspended_step_partial``: in the union, not produced yet (see ``RunOutcome``)."""

    kind: Literal["suspended_step_partial"] = "suspended_step_partial"
    suspended_step_id: str


RunOutcome = Annotated[
    CompletedOutcome
    | FailedOutcome
    | InterruptedOutcome
    | AbortedOutcome
    | SuspendedClientToolOutcome
    | SuspendedAwaitingChildrenOutcome
    | SuspendedStepPartialOutcome,
    Field(discriminator="kind"),
]
"""How a run ended (seed 002 ``RunOutcome``): the seeds' seven kinds, discriminated by ``kind``.

All seven are in the union, so an exhaustive ``match`` written from the seeds type-checks and
validates. ``suspended_awaiting_children`` is produced when a parent's blocking companion waits on a
human: the parent parks (its workflow ends) until the answer has completed the companion. A child
that is merely running is a DBOS child workflow the parent waits on durably (a crash recovers both),
so that wait holds the parent's workflow rather than suspending. ``suspended_step_partial`` is not
produced: it is the stateless runtimes' exit in the middle of a tool batch; here each
tool call is its own recorded DBOS step, so a batch interrupted by a crash resumes at the first
unrecorded call, and a batch waiting on clients parks as ``suspended_client_tool`` with the finished
calls' results already recorded.
"""


class ContinueStepOutcome(_Data):
    """One loop iteration ended and the loop goes on (seed 002 ``StepOutcome``)."""

    kind: Literal["continue"] = "continue"


class StopStepOutcome(_Data):
    """One loop iteration ended the run, with the ``RunOutcome`` kind it ends with."""

    kind: Literal["stop"] = "stop"
    reason: Literal[
        "completed",
        "failed",
        "interrupted",
        "aborted",
        "suspended_client_tool",
        "suspended_awaiting_children",
        "suspended_step_partial",
    ]


StepOutcome = Annotated[ContinueStepOutcome | StopStepOutcome, Field(discriminator="kind")]
"""Per-iteration result (seed 002 ``StepOutcome``). Kept for parity: the DBOS loop neither produces nor
consumes it (it decides from recorded step outputs)."""


def get_sub_session_refs_by_type(refs: list[SubSessionRef], agent_type: str) -> list[SubSessionRef]:
    """The refs to children of agent type ``agent_type``, in order (seed 002 ``getSubSessionRefsByType``)."""
    return [ref for ref in refs if ref.agent_type == agent_type]


class CanResumeResult(_Data):
    """Whether ``resume`` would accept the session, and why not."""

    can_resume: bool
    reason: str | None = None


SendInput = str | list[UserInputMessage]
"""Input accepted by ``resume(..., message=...)`` and similar follow-ups."""
