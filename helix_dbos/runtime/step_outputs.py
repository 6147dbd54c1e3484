"""The recorded outputs of an agent run's DBOS steps: a persisted contract, typed.

DBOS serialises what a step returns and, when it replays a run, hands the recorded value back
instead of running the step again. So these are ``TypedDict``s, not models: at run time they are
the same plain JSON dicts the steps have always returned (a run recorded before this module existed
replays unchanged), while mypy checks every producer and reader of a key. Keys are never renamed or
removed; a new key is ``NotRequired`` (older recordings lack it).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class CommitOutput(TypedDict):
    """``CommitResult`` as JSON: the checkpoint a step commit wrote (or found already written)."""

    checkpoint_id: str
    applied: bool
    interrupt_requested: bool
    interrupt_reason: str | None


class LLMStepOutput(TypedDict):
    """``{agent}.llm``: the previous iteration's commit, then either an interrupt or the model's step."""

    commit: CommitOutput | None
    interrupted: bool
    interrupt_reason: NotRequired[str | None]
    """Set when ``interrupted``."""
    step_result: NotRequired[dict[str, Any]]
    """The ``StepResult`` as JSON; set when not ``interrupted``."""
    duration_ms: NotRequired[float]


class WritesOutput(TypedDict):
    """``StepWrites`` as JSON: a tool's state operations, merged by the seeds' contract."""

    ops: list[dict[str, Any]]
    warnings: list[str]


class EventOutput(TypedDict):
    """A custom event a tool emitted."""

    event_name: str
    data: Any


class ToolStepOutput(TypedDict):
    """``{agent}.tool.{name}``: one tool call's result.

    Also the shape of the results the loop makes itself (unknown tool, answered client call,
    rejected approval), which are never recorded.
    """

    tool_call_id: str
    tool_name: str
    success: bool
    result: Any
    error: str | None
    writes: WritesOutput
    patches: list[dict[str, Any]]
    events: list[EventOutput]
    duration_ms: float
    finish_output: Any
    """The agent's output, when a finish_with tool succeeded."""
    transform_error: str | None
    """Set when a finish_with tool's transform raised (the run fails)."""
    after_tool: NotRequired[bool]
    """``False`` on results the loop makes for rejected approvals: no ``after_tool`` hook for them."""
    outcome_unknown: NotRequired[bool]
    """``True`` when a not-retry-safe call's worker died while it ran: the tool was not run again,
    and whether it took effect is unknown (:mod:`helix_dbos.runtime.unknown_outcomes`)."""
    idempotency_key: NotRequired[str]
    """The call's ``ToolContext.idempotency_key``, on an ``outcome_unknown`` result (to look the call up)."""


class ToolStartsStepOutput(TypedDict):
    """``{agent}.tool_starts``: the not-retry-safe calls of a phase, recorded before any of them runs."""

    tool_call_ids: list[str]
    started_at_ms: int


def empty_tool_output(tool_call_id: str, tool_name: str) -> ToolStepOutput:
    """A call's result before it is filled in: no result, no error, no writes.

    The one literal every producer of a :class:`ToolStepOutput` starts from (the tool step, local
    and remote delegations), so a key added to the shape is added everywhere at once.
    """
    return {
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "success": False,
        "result": None,
        "error": None,
        "writes": {"ops": [], "warnings": []},
        "patches": [],
        "events": [],
        "duration_ms": 0.0,
        "finish_output": None,
        "transform_error": None,
    }


class MemoryStepOutput(TypedDict):
    """``{agent}.memory``: the memories found for the turn and the hidden message carrying them."""

    memory_ids: list[str]
    message: dict[str, Any] | None
    """The injection ``UserMessage`` as JSON; ``None`` when nothing new matched."""


class HooksStepOutput(TypedDict):
    """``{agent}.hooks``: how many deferred hooks fired, and the state changes they made."""

    fired: int
    writes: NotRequired[dict[str, Any]]
    """``StepWrites`` (JSON) of ``update_state`` calls in ``after_tool`` / ``on_message`` hooks."""
    patches: NotRequired[list[dict[str, Any]]]
    """The RFC 6902 form of ``writes``, streamed as a ``state_patch`` chunk."""


class FinalizeStepOutput(TypedDict):
    """``{agent}.finalize``: the last commit of the run."""

    commit: CommitOutput
    closing_chunks: NotRequired[int]
    """Chunks the step wrote before ending (or failing) the stream itself; absent when it did not
    (a suspended or interrupted run, or a run recorded before the step closed streams)."""


class FailRunStepOutput(TypedDict):
    """``helix.fail_run``: the error recorded as the run's failure."""

    error: str


class StopReasonStepOutput(TypedDict):
    """``{agent}.stop_reason``: why the session's run must stop, as the store said when the step ran."""

    reason: str | None
    """``aborted: ...`` / ``interrupted: ...`` (:func:`~helix_dbos.runtime.abort.durable_stop_reason`), or ``None``."""


class GateStepOutput(TypedDict):
    """``{agent}.approval_gate.{tool}``: whether the call needs approval (a raising gate does)."""

    required: bool
    error: str | None


class PendingRow(TypedDict):
    """``PendingToolCall`` as JSON: a human-in-the-loop call's row as a step read it."""

    session_id: str
    tool_call_id: str
    run_id: str
    workflow_id: str
    tool_name: str
    kind: Literal["client", "approval", "budget", "rerun"]
    arguments: dict[str, Any]
    arguments_digest: str
    status: Literal["pending", "answered", "expired", "applied", "cancelled"]
    delivery: Literal["hot", "parked"]
    submission: dict[str, Any] | None
    deadline_ms: int | None
    created_at: int
    answered_at: int | None


class CheckStepOutput(TypedDict):
    """``{agent}.hitl.check``: the rows, the time the step looked, and the session's control flags."""

    now_ms: int
    rows: dict[str, PendingRow]
    aborted: bool
    interrupted: bool
    parked: NotRequired[bool]
    """Whether this check parked the open calls (its rows are then the rows after parking). Absent
    from checks recorded before checks could park: such a run parks in its own ``hitl.park`` step."""
    replaces_registration: NotRequired[bool]
    """Set on a continuation's first check: when it finds every call of the batch answered (or
    expired), the continuation takes no ``hitl.register`` (which would only read the same rows
    again). Absent from checks recorded before: such a continuation registers, as it did then."""


class RegisterStepOutput(TypedDict):
    """``{agent}.hitl.register``: the hot-window deadline and each call's deadline and digest."""

    hot_deadline_ms: int
    deadlines: dict[str, int | None]
    digests: dict[str, str]
    check: NotRequired[CheckStepOutput]
    """The first check, read in this step; it parks when the hot window is zero or the run is
    interrupted (registrations recorded before never parked here). Absent from registrations
    recorded before that: such a run takes its first check in its own ``hitl.check`` step."""
    answers_in_wakes: NotRequired[bool]
    """Whether the wait may take an answer from the wake-up that carries it (:class:`WakeMessage`)
    instead of a ``hitl.check`` step. Absent from registrations recorded before: such a run takes a
    check after every wake-up, whatever the message, as it did when it recorded its steps."""


class WakeMessage(TypedDict):
    """The DBOS message that wakes a run waiting hot (``DBOS.recv`` records it as the wait's output)."""

    wake: str
    """Why: the answered call's id, ``"interrupt"`` or ``"abort"``."""
    answer: NotRequired[PendingRow]
    """The call's row as the submission's transaction left it (``answered``: final), when a
    submission sent it. Absent from wake-ups sent by earlier versions and for interrupt/abort."""


class BudgetStartStepOutput(TypedDict):
    """``{agent}.budget.start``: what a budgeted run starts from."""

    spent_tokens: int
    """Billed tokens of the session before this run (``scope="session"``; 0 for ``"run"``)."""
    spent_cost_usd: float
    raise_to: dict[str, float]
    """Limits raised by the session's earlier approvals (``scope="session"``)."""
    open_call: PendingRow | None
    """A ``budget`` call the previous run suspended on, still to be answered or applied."""


class ParkStepOutput(TypedDict):
    """``{agent}.hitl.park``: the rows after parking (answered ones can still be used)."""

    rows: dict[str, PendingRow]


class RateParkStepOutput(TypedDict):
    """``{agent}.rate_limit.park``: the admission the run parked on (the run's thread left after it)."""

    ticket: str


class ResumedStepOutput(TypedDict):
    """``{agent}.hitl.resumed``: nothing (the step exists so the hook fires once)."""


class ResumedAtStartStepOutput(TypedDict):
    """``{agent}.resumed``: whether ``on_agent_resumed`` fired (not when the run waits for answers)."""

    fired: bool


class ChildStartOutput(TypedDict):
    """``{agent}.child.start``: the child run that was opened (or why it could not be)."""

    session_id: str
    run_id: str
    workflow_id: str
    request: dict[str, Any] | None
    """The child workflow's input (``RunRequest`` as JSON); ``None`` when the child was not opened."""
    deadline_ms: int | None
    """When the parent stops waiting and stops the child (ms since the epoch); ``None``: no deadline."""
    timeout_ms: int | None
    """The budget the deadline was computed from (for the error message)."""
    started_at_ms: int | None
    """When the child's run was opened (its ``RunRecord.started_at``)."""
    error: str | None
    """Why the child could not be opened (the parent's tool call fails with it)."""


class AwaitedChild(TypedDict):
    """``{agent}.companion.awaited``: a blocking companion a parked parent awaits, and its current run."""

    name: str
    agent_type: str
    child: ChildStartOutput
    """The companion's current run, as :func:`~.children.await_child` waits on it."""


class ChildWaitOutput(TypedDict):
    """``{agent}.child.wait``: how the child ended, as the parent sees it."""

    status: Literal[
        "completed",
        "failed",
        "interrupted",
        "suspended_client_tool",
        "suspended_awaiting_children",
        "timeout",
        "aborted",
        "running",
    ]
    """The child's final status, ``timeout`` (deadline passed; the child was stopped), ``aborted``
    (the parent was aborted while waiting; the child was stopped) or ``running`` (a wait bounded by
    the hot window ended first; the parent parks on the child)."""
    output: Any
    error: str | None
    duration_ms: float
    """From the child's open to the end of the wait."""


class RemoteStartOutput(TypedDict):
    """``{agent}.remote.start``: the remote session and run a sub-agent call started (or found)."""

    session_id: str
    """The remote session (deterministic: :func:`~helix_dbos.remote_sub_agent.remote_session_id_for`)."""
    run_id: str
    started_at_ms: int
    """When the parent first recorded the delegation (a re-executed start keeps it)."""
    deadline_ms: int | None
    """``started_at_ms + timeout_ms`` when the tool has a timeout."""
    error: str | None
    """Why the remote run could not be started; the call then fails with it."""


RemoteWaitStatus = Literal["completed", "failed", "interrupted", "timeout", "aborted", "client-tool-unsupported"]


class RemoteWaitOutput(TypedDict):
    """``{agent}.remote.wait``: how the remote run ended, as the parent sees it."""

    status: RemoteWaitStatus
    output: Any
    error: str | None
    failure_reason: str | None
    """``client-tool-unsupported`` when the remote run waited for a client-executed tool."""
    duration_ms: float


class CompanionChild(TypedDict):
    """A persistent companion as a companion step read it (the parent's ref and the child's session)."""

    name: str
    agent_type: str
    session_id: str
    status: Literal["running", "completed", "failed", "terminated", "interrupted"]
    run_id: str | None
    workflow_id: str | None
    output: Any
    error: str | None


class CompanionOpenOutput(TypedDict):
    """``{agent}.companion.open``: what a spawn/send did to the child session.

    ``action`` is the :data:`~helix_dbos.orchestration.companions.DispatchAction` taken; when a run
    was opened (``create`` / ``continue`` / ``respawn`` / ``resume`` / ``opened``), ``request`` is
    its workflow input and ``workflow_id`` the id the parent starts it under. ``interrupt`` leaves
    ``workflow_id`` at the running workflow the parent then waits for.
    """

    action: str
    name: str
    agent_type: str
    session_id: str
    notify: bool
    """The companion is non-blocking: the dispatch returns at once and a notice follows."""
    error: str | None
    workflow_id: str | None
    run_id: str | None
    request: dict[str, Any] | None


class CompanionStatusOutput(TypedDict):
    """``{agent}.companion.status`` / ``.wait`` / ``.terminate``: the companions read, and when."""

    now_ms: int
    children: list[CompanionChild]


class SkillsCatalogStepOutput(TypedDict):
    """``{agent}.skills.catalog``: the skills fragment this run's system prompt carries (``''`` for none)."""

    fragment: str


__all__ = [
    "AwaitedChild",
    "BudgetStartStepOutput",
    "CheckStepOutput",
    "ChildStartOutput",
    "ChildWaitOutput",
    "CommitOutput",
    "CompanionChild",
    "CompanionOpenOutput",
    "CompanionStatusOutput",
    "EventOutput",
    "FailRunStepOutput",
    "FinalizeStepOutput",
    "GateStepOutput",
    "HooksStepOutput",
    "LLMStepOutput",
    "MemoryStepOutput",
    "ParkStepOutput",
    "PendingRow",
    "RateParkStepOutput",
    "RegisterStepOutput",
    "RemoteStartOutput",
    "RemoteWaitOutput",
    "RemoteWaitStatus",
    "ResumedAtStartStepOutput",
    "ResumedStepOutput",
    "SkillsCatalogStepOutput",
    "StopReasonStepOutput",
    "ToolStartsStepOutput",
    "ToolStepOutput",
    "WakeMessage",
    "WritesOutput",
    "empty_tool_output",
]
