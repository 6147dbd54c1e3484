"""Remote sub-agents: ``create_remote_sub_agent_tool`` delegates a call to an agent another service runs.

The seeds' "Remote Sub-Agents": a parent delegates to an agent served by a separate helix-dbos
service (``helix-dbos serve``) over HTTP + SSE. The model sees one more tool,
``subagent__{name}``, exactly like an ephemeral sub-agent; the runtime does not execute it like a
tool but through :mod:`helix_dbos.runtime.remote_sub_agents`:

- the remote session id derives from the parent's session and the tool call, with the parent's
  turn and step (:func:`remote_session_id_for`), so a replayed or recovered parent re-attaches to the run it
  started instead of starting another (the start is idempotent on the remote service too);
- every transport call is made inside a DBOS step; the remote stream is proxied into the parent's
  stream between ``subagent_start`` and ``subagent_end``, resuming after the last remote sequence
  the parent stored, and a recovered parent first asks :meth:`RemoteAgentTransport.get_status`;
- the parent's :class:`~helix_dbos.session.SubSessionRef` records the remote metadata
  (:class:`~helix_dbos.session.RemoteSessionInfo`); an interrupt or abort of the parent is passed
  on (:meth:`RemoteAgentTransport.interrupt` / ``abort``);
- a remote run that waits for a client-executed tool fails the call at once
  (:class:`~helix_dbos.errors.RemoteSubAgentClientToolUnsupportedError`, ``client-tool-unsupported``):
  the browser's answer has no route across the HTTP boundary.

The transport is a protocol: :class:`helix_dbos.client.HttpRemoteAgentTransport` talks to a
helix-dbos service; a test or another protocol can bring its own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Any, Literal, Protocol, TypeGuard, runtime_checkable

from pydantic import BaseModel, ConfigDict

from helix_dbos.errors import SubAgentDefinitionError
from helix_dbos.tool import SUBAGENT_TOOL_PREFIX, Tool

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_REMOTE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
"""The session ids a helix-dbos service accepts (its ``SESSION_ID_PATTERN``)."""

RemoteRunState = Literal["running", "suspended", "completed", "failed", "interrupted"]


class RemoteRunStatus(BaseModel):
    """What :meth:`RemoteAgentTransport.get_status` reports about a remote run (the seeds' ``/status``)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    status: RemoteRunState
    """``running`` and ``suspended`` (waiting for a client) have not ended; the others have."""
    output: Any = None
    error: str | None = None
    aborted: bool = False
    awaiting_client_tool: bool = False
    """The remote run waits for a client-executed tool: the delegation cannot go on."""

    @property
    def ended(self) -> bool:
        return self.status in ("completed", "failed", "interrupted")


class RemoteStreamEvent(BaseModel):
    """One event of a remote session's stream: a chunk (with its remote ``sequence``) or a control event."""

    model_config = ConfigDict(extra="forbid")

    event: str
    """``chunk``, ``status``, ``end``, ``fail`` or ``truncated``."""
    data: dict[str, Any]
    sequence: int | None = None


@runtime_checkable
class RemoteAgentTransport(Protocol):
    """How a parent reaches a remote agent service (the seeds' ``RemoteAgentTransport``).

    Synchronous: every call is made inside a DBOS step, in a worker thread. ``start`` must be
    idempotent on ``session_id`` (a re-executed step starts it again); the others may raise
    :class:`~helix_dbos.errors.ServiceResponseError` (``retryable`` ones are retried by the caller).
    """

    def describe(self) -> str:
        """Where the remote service is (a URL), recorded on the parent's ``SubSessionRef``."""
        ...

    def start(self, agent: str, message: str, session_id: str) -> str:
        """Start ``agent`` on ``message`` in session ``session_id`` (or find that run); returns the run id."""
        ...

    def stream(self, session_id: str, *, after_sequence: int) -> Iterator[RemoteStreamEvent]:
        """The session's events after ``after_sequence``, until ``end`` or ``fail``."""
        ...

    def get_status(self, session_id: str) -> RemoteRunStatus: ...

    def interrupt(self, session_id: str, reason: str) -> None: ...

    def abort(self, session_id: str, reason: str) -> None: ...


class RemoteSubAgentTool(Tool):
    """A tool that delegates to a remote agent. Build it with :func:`create_remote_sub_agent_tool`."""

    remote_agent: str
    """The agent's name on the remote service."""
    transport: Any
    """The :class:`RemoteAgentTransport` that reaches it."""


def create_remote_sub_agent_tool(
    name: str,
    *,
    description: str,
    input_schema: type[BaseModel],
    transport: RemoteAgentTransport,
    remote_agent: str | None = None,
    timeout_ms: int | None = None,
) -> RemoteSubAgentTool:
    """A tool named ``subagent__{name}`` whose call runs ``remote_agent`` (default ``name``) remotely.

    The call's validated input becomes the remote run's first message (JSON, sorted keys); the
    remote run's output becomes the call's result. ``timeout_ms`` bounds the remote run from its
    start (durably: a recovered parent keeps the deadline); past it the remote run is aborted.
    """
    tool_name = f"{SUBAGENT_TOOL_PREFIX}{name}"
    if not _TOOL_NAME.fullmatch(tool_name):
        raise SubAgentDefinitionError(
            name, f"the tool name {tool_name!r} is not a valid tool name (use 1-54 letters, digits, '_' or '-')"
        )
    if not (isinstance(input_schema, type) and issubclass(input_schema, BaseModel)):
        raise SubAgentDefinitionError(name, "input_schema must be a pydantic model class")
    if not isinstance(transport, RemoteAgentTransport):
        raise SubAgentDefinitionError(name, "transport must implement RemoteAgentTransport (HttpRemoteAgentTransport)")
    if timeout_ms is not None and (not isinstance(timeout_ms, int) or timeout_ms <= 0):
        raise SubAgentDefinitionError(name, "timeout_ms must be a positive integer")
    return RemoteSubAgentTool(
        name=tool_name,
        description=description,
        input_schema=input_schema,
        execute=None,
        timeout_ms=timeout_ms,
        remote_agent=remote_agent or name,
        transport=transport,
    )


def is_remote_sub_agent_tool(tool: Any) -> TypeGuard[RemoteSubAgentTool]:
    """True for tools made by :func:`create_remote_sub_agent_tool`."""
    return isinstance(tool, RemoteSubAgentTool)


def remote_session_id_for(parent_session_id: str, tool_call_id: str) -> str:
    """The remote session a parent's tool call opens: one per call, found again on replay.

    ``{parent}-sub-{call}`` like an ephemeral child's when the remote service accepts it as a session
    id; otherwise (an OpenAI-style ``call_…`` id, whose ``_`` the pattern refuses, a ``/``, a long parent id)
    ``remote-sub-`` and a digest of both. The runtime
    passes the call with the parent's turn and step (``{turn}.{step}-{tool call id}``,
    ``helix_dbos.runtime.ids.scoped_call_key``) as ``tool_call_id``, so a call id the model uses
    again on a later turn opens a new remote session; runs recorded before that pass the bare id.
    """
    plain = f"{parent_session_id}-sub-{tool_call_id}"
    if _REMOTE_ID.fullmatch(plain):
        return plain
    digest = hashlib.sha256(f"{parent_session_id}\x00{tool_call_id}".encode()).hexdigest()[:40]
    return f"remote-sub-{digest}"


__all__ = [
    "RemoteAgentTransport",
    "RemoteRunState",
    "RemoteRunStatus",
    "RemoteStreamEvent",
    "RemoteSubAgentTool",
    "create_remote_sub_agent_tool",
    "is_remote_sub_agent_tool",
    "remote_session_id_for",
]
