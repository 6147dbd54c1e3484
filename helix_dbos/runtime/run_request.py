"""What a run is given and gives back: the workflow's request and summary, the identity its steps receive.

Plain data, importing no other runtime module, so every runtime module can name a run's request or
identity without pulling in the steps or the loop (re-exported where they were first defined:
``run_context`` for the request and summary, ``steps`` for the identity and the outcome event).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.agent import AgentConfig
from helix_dbos.capability import FinalStatus
from helix_dbos.messages import Message
from helix_dbos.usage import Budget

OUTCOME_EVENT = "helix.outcome"
"""DBOS event carrying a run's final outcome; waiters in other processes wake on it (LISTEN/NOTIFY)."""


class RunRequest(BaseModel):
    """The workflow's input: ids plus what the run starts from (decided by ``start_run``)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    workflow_id: str
    agent_name: str
    turn: int
    mode: Literal["execute", "resume", "retry"] = "execute"
    stream_id: str
    start_message_count: int
    start_custom_state: dict[str, Any] = Field(default_factory=dict)
    previous_run_id: str | None = None
    fingerprint: str | None = None
    stream_start_sequence: int = 0
    resume_messages: list[Message] = Field(default_factory=list)
    """Input of a ``resume``; appended after any outstanding tool batch is resolved, so a user
    message never lands between a tool call and its result."""
    hook_names: list[str] | None = None
    """The hooks defined (agent's and per-call) when the run started. They decide which hook steps
    the run takes, so a replay in a process without the per-call hooks takes the same steps and
    DBOS finds its recorded ones. ``None`` (runs recorded before this field) uses the live hooks."""
    parent_session_id: str | None = None
    """Set on a child run (a sub-agent or companion): the session of the parent that started it."""
    root_session_id: str | None = None
    """Set on a child run: the session at the top of its tree (a top-level run is its own root)."""
    parent_stream_id: str | None = None
    """Set on a child run: every chunk the child writes is also written to this stream (the
    parent's), so one reader of the parent sees its children's work (one level: a grandchild's
    chunks are copied to the child's stream only; see :mod:`.children`)."""
    child_mode: Literal["ephemeral", "persistent"] | None = None
    """Set on a child run: ``ephemeral`` children refuse human-in-the-loop calls (nobody can answer
    them: the parent waits on the child, and the child's session is not the one clients watch)."""
    deadline_ms: int | None = None
    """Set on a sub-agent child whose tool has a timeout: when its parent's open said it must end
    (kept where the child runs, :mod:`.child_deadlines`, so it holds while the parent is parked)."""
    timeout_ms: int | None = None
    """The timeout ``deadline_ms`` came from (the error a child stopped at its deadline names it)."""
    budget: Budget | None = None
    """The agent's budget when the run started. It decides the budget steps the run takes, so a
    definition edited while the run is in flight cannot change them on replay."""


class RunSummary(BaseModel):
    """What the workflow returns (JSON): the run's status, output or error, and ids."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    status: FinalStatus
    output: Any = None
    error: str | None = None
    step_count: int = 0
    pending_tool_call_ids: list[str] = Field(default_factory=list)
    """Set when the run suspended waiting for client results or approvals."""
    children: list[dict[str, Any]] = Field(default_factory=list)
    """Set when the run suspended awaiting children that wait on humans (``SuspendedChildWait`` as JSON)."""


@dataclass(frozen=True)
class RunIdentity:
    """Who is running: passed to every step so it can write to the right session and stream."""

    session_id: str
    run_id: str
    workflow_id: str
    stream_id: str
    agent: AgentConfig
    stream_start_sequence: int = 0
    """Where this run's chunks start in the session's stream."""
    parent_stream_id: str | None = None
    """A child run's parent stream: the child's chunks are mirrored there (see ``RunRequest``)."""
    root_session_id: str | None = None
    """The session at the top of this run's tree (its own for a top-level run)."""
    parent_session_id: str | None = None
    """A child run's parent session: the child's end wakes a parent parked on it (:mod:`.child_park`)."""


__all__ = ["OUTCOME_EVENT", "RunIdentity", "RunRequest", "RunSummary"]
