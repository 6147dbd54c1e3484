"""What an AG-UI ``RunAgentInput`` asks of a session, decided without I/O.

AG-UI (the Agent-User Interaction protocol: CopilotKit and others) has the client post a
``RunAgentInput`` (``threadId``, ``runId``, ``messages``, ``tools``, ``state``, ``context``,
``forwardedProps``, ``resume``) and read the run as server-sent events. The client keeps and posts
the whole conversation, but the session keeps it too, so only the end of the posted messages
matters (the same rule as the AI SDK route, :mod:`helix_dbos.service.ui_chat`):

- a **user** message last is the next turn: its text starts a run keyed by the thread and the
  AG-UI ``runId`` (:func:`turn_key`), so a repeated post finds the same run;
- **tool** messages last answer client-executed tool calls the run parked on (the client ran the
  tool after the previous AG-UI run finished with the call pending): each becomes a
  ``submit_tool_result`` for its ``toolCallId`` (:func:`tool_answers`);
- ``resume`` entries answer the previous run's interrupts (helix's approval-gated calls): each
  becomes an approval response for the interrupt's tool call.

The thread maps to one session (:func:`thread_session_id`), scoped by the caller like the other
routes, so two callers choosing the same ``threadId`` never share a session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.errors import AGUIInputError
from helix_dbos.runtime.ids import scoped_session_id
from helix_dbos.session import ApprovalResponse, ClientToolResult

__all__ = [
    "AGUIAnswers",
    "AGUIMessage",
    "AGUIResumeEntry",
    "AGUITool",
    "AGUITurn",
    "RunAgentInput",
    "plan_run",
    "thread_session_id",
    "tool_answers",
    "turn_key",
]

Id = Annotated[str, Field(min_length=1, max_length=400)]


class AGUIMessage(BaseModel):
    """One message of ``RunAgentInput.messages`` (unknown fields kept: the protocol grows)."""

    model_config = ConfigDict(extra="allow")

    id: Id
    role: Literal["developer", "system", "assistant", "user", "tool", "activity", "reasoning"]
    content: str | list[dict[str, Any]] | dict[str, Any] | None = None
    """Text, or (user and tool messages) a list of content parts."""
    toolCallId: str | None = None
    """For ``tool`` messages: the call this message answers."""
    error: str | None = None
    """For ``tool`` messages: set when the client failed to run the tool."""
    toolCalls: list[dict[str, Any]] | None = None


class AGUITool(BaseModel):
    """A tool the client offers (``RunAgentInput.tools``)."""

    model_config = ConfigDict(extra="allow")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    description: str = ""
    parameters: Any = None


class AGUIResumeEntry(BaseModel):
    """An answer to one interrupt of the previous run (``RunAgentInput.resume``)."""

    model_config = ConfigDict(extra="allow")

    interruptId: Id
    status: Literal["resolved", "cancelled"]
    payload: Any = None
    """For an approval: ``{"approved": bool, "reason": str}``; absent means approved when resolved."""


class RunAgentInput(BaseModel):
    """The body an AG-UI client (``HttpAgent``) posts: one AG-UI run of a thread."""

    model_config = ConfigDict(extra="allow")

    threadId: Id
    """The conversation: one thread, one helix session."""
    runId: Id
    """The AG-UI run: a repeat of the same ``runId`` on the thread finds the same helix run."""
    parentRunId: str | None = None
    protocolVersion: str | None = None
    messages: Annotated[list[AGUIMessage], Field(min_length=1)]
    tools: list[AGUITool] = Field(default_factory=list)
    """Tools the client runs; the agent's own client-executed tools of the same names are what the model sees."""
    context: list[dict[str, Any]] = Field(default_factory=list)
    state: dict[str, Any] | None = None
    """The client's state; seeds a new thread's custom state, ignored on an existing thread."""
    forwardedProps: Any = None
    """``{"agent": "<name>"}`` picks the agent when the service serves several."""
    resume: list[AGUIResumeEntry] | None = None


@dataclass(frozen=True)
class AGUITurn:
    """Start (or find) the run answering the last user message."""

    text: str
    idempotency_key: str
    state: dict[str, Any] | None


@dataclass(frozen=True)
class AGUIAnswers:
    """Answer the calls the session's run is parked on."""

    results: list[AGUIMessage]
    """The trailing tool messages (client-executed tools' results)."""
    resume: list[AGUIResumeEntry]
    """The answers to interrupts (approval-gated calls)."""


def thread_session_id(thread_id: str, scope: str) -> str:
    """The session of a thread: deterministic (a repeat or a reconnect finds it) and scoped to the caller."""
    return scoped_session_id("agui", thread_id, scope)


def turn_key(thread_id: str, run_id: str) -> str:
    """The idempotency key of the helix run one AG-UI run starts."""
    return f"agui:{thread_id}:{run_id}"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def plan_run(body: RunAgentInput) -> AGUITurn | AGUIAnswers:
    """What the post asks for: a new turn (a user message last) or answers (tool messages last, or ``resume``)."""
    results: list[AGUIMessage] = []
    for message in reversed(body.messages):
        if message.role != "tool":
            break
        if not message.toolCallId:
            raise AGUIInputError(f"tool message {message.id!r} has no toolCallId")
        results.insert(0, message)
    if results or body.resume:
        return AGUIAnswers(results=results, resume=list(body.resume or []))
    if body.messages[-1].role != "user":
        raise AGUIInputError("the last message must be the user's (a new turn) or tool results (answers)")
    text = _text(body.messages[-1].content)
    if not text.strip():
        raise AGUIInputError("the last user message has no text")
    return AGUITurn(text=text, idempotency_key=turn_key(body.threadId, body.runId), state=body.state or None)


def _result_value(message: AGUIMessage) -> Any:
    """A tool message's content as the result the model sees: JSON when it parses, else the text."""
    text = _text(message.content)
    try:
        return json.loads(text)
    except ValueError:
        return text


def tool_answers(answers: AGUIAnswers, open_calls: Mapping[str, str]) -> list[ClientToolResult | ApprovalResponse]:
    """The submissions the answers make, for the calls still open (call id -> kind).

    A tool message answers an open client-executed call; a ``resume`` entry (its ``interruptId``
    is the tool call id, see :mod:`helix_dbos.service.agui_events`) answers an open approval:
    ``resolved`` approves unless its payload says ``{"approved": false}``; ``cancelled`` denies.
    Answers to calls that are not open (answered before) are skipped, so a repeated post is harmless.
    """
    submissions: list[ClientToolResult | ApprovalResponse] = []
    for message in answers.results:
        call_id = str(message.toolCallId)
        if open_calls.get(call_id) != "client":
            continue
        if message.error is not None:
            submissions.append(ClientToolResult(tool_call_id=call_id, error=message.error or "Tool failed"))
        else:
            submissions.append(ClientToolResult(tool_call_id=call_id, result=_result_value(message)))
    for entry in answers.resume:
        if open_calls.get(entry.interruptId) not in ("approval", "rerun"):
            continue
        payload = entry.payload if isinstance(entry.payload, dict) else {}
        approved = entry.status == "resolved" and payload.get("approved", True) is not False
        reason = payload.get("reason")
        submissions.append(
            ApprovalResponse(
                tool_call_id=entry.interruptId, approved=approved, reason=str(reason) if reason is not None else None
            )
        )
    return submissions
