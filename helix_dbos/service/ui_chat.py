"""What an AI SDK ``useChat`` request asks of a session, decided without I/O.

``useChat``'s default transport (``DefaultChatTransport``) posts the whole conversation as UI
messages, ``{id, messages, trigger, messageId}`` plus the transport's ``body`` extras (here:
``agent``), and reconnects with ``GET <api>/<id>/stream``. The session keeps the conversation
itself, so of the posted messages only the last one matters:

- a **user** message is the next turn: its text starts a run, keyed by the chat and the message
  id (:func:`turn_key`), so a repeated post (a retry, a double click, a proxy) finds the same run
  instead of starting a second one;
- an **assistant** message carries the browser's answers (``useChat``'s ``addToolOutput`` and
  ``addToolApprovalResponse`` put them on its tool parts): each answer to a call the session is
  waiting for becomes a ``submit_tool_result`` (:func:`tool_answers`); answers already recorded are
  skipped, so that post is repeatable too.

The chat id maps to one session (:func:`chat_session_id`), scoped by the caller so two callers
choosing the same chat id never share a session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.double_text import DoubleTextPolicy
from helix_dbos.errors import HelixError
from helix_dbos.runtime.ids import scoped_session_id
from helix_dbos.session import ApprovalResponse, ClientToolResult

__all__ = [
    "Answers",
    "NewTurn",
    "UIChatMessage",
    "UIChatRequest",
    "chat_session_id",
    "plan_request",
    "reply_message_id",
    "tool_answers",
    "turn_key",
]


class UIChatMessage(BaseModel):
    """A ``UIMessage`` as ``useChat`` posts it (unknown fields kept: the SDK adds them over time)."""

    model_config = ConfigDict(extra="allow")

    id: Annotated[str, Field(min_length=1, max_length=400)]
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]] = Field(default_factory=list)
    metadata: Any = None


class UIChatRequest(BaseModel):
    """The body ``DefaultChatTransport`` posts (``agent`` comes from the transport's ``body`` option)."""

    model_config = ConfigDict(extra="allow")

    id: Annotated[str, Field(min_length=1, max_length=400)]
    """The chat id (``useChat``'s ``id``): one chat, one session."""
    messages: Annotated[list[UIChatMessage], Field(min_length=1)]
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = None
    agent: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """The agent to run; optional when the service serves exactly one."""
    double_text: DoubleTextPolicy | None = None
    """What a message posted while the chat's run is in flight does (the transport's ``body``, or the
    ``X-Helix-Double-Text`` header); default: the agent's policy. See ``docs/double-texting.md``."""


@dataclass(frozen=True)
class NewTurn:
    """Start (or find) the run answering a user message."""

    text: str
    idempotency_key: str


@dataclass(frozen=True)
class Answers:
    """Answer pending tool calls from the assistant message the browser posted back."""

    message_id: str
    """The assistant message the reply continues (``useChat`` keeps appending to it)."""
    parts: list[dict[str, Any]]
    """That message's tool parts."""
    known_tool_calls: dict[str, bool]
    """Call id -> dynamic, for every tool part the browser shows (not to be announced again)."""
    approval_calls: frozenset[str]
    """The calls among them the browser was asked to approve."""


def chat_session_id(chat_id: str, scope: str) -> str:
    """The session of a chat: deterministic (a repeat or a reconnect finds it) and scoped to the caller."""
    return scoped_session_id("chat", chat_id, scope)


def turn_key(chat_id: str, user_message_id: str) -> str:
    """The idempotency key of the run answering one user message of one chat."""
    return f"ui-chat:{chat_id}:{user_message_id}"


def reply_message_id(run_id: str) -> str:
    """The assistant message id of a run's reply: stable across repeats and replays of the run."""
    return f"msg-{run_id}"


def _is_tool_part(part: Mapping[str, Any]) -> bool:
    kind = part.get("type")
    return isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool")


def _user_text(message: UIChatMessage) -> str:
    return "".join(str(p.get("text", "")) for p in message.parts if p.get("type") == "text")


def plan_request(request: UIChatRequest) -> NewTurn | Answers:
    """What the post asks for: a new turn (last message from the user) or answers (from the assistant)."""
    last = request.messages[-1]
    if last.role == "user":
        text = _user_text(last)
        if not text.strip():
            raise HelixError(
                "The last user message has no text part (files alone are not supported on this route)",
                code="validation_error",
                retryable=False,
            )
        return NewTurn(text=text, idempotency_key=turn_key(request.id, last.id))
    if last.role == "assistant":
        tools = [p for p in last.parts if _is_tool_part(p) and isinstance(p.get("toolCallId"), str)]
        known = {str(p["toolCallId"]): p.get("type") == "dynamic-tool" for p in tools}
        approvals = frozenset(str(p["toolCallId"]) for p in tools if isinstance(p.get("approval"), dict))
        return Answers(
            message_id=request.messageId or last.id, parts=tools, known_tool_calls=known, approval_calls=approvals
        )
    raise HelixError("The last message must be the user's or the assistant's", code="validation_error", retryable=False)


def tool_answers(
    parts: list[dict[str, Any]], open_calls: Mapping[str, str]
) -> list[ClientToolResult | ApprovalResponse]:
    """The submissions a posted assistant message makes, for the calls still open (id -> kind).

    A client-executed tool's part answers with ``output-available`` (its ``output``) or
    ``output-error`` (its ``errorText``); an approval-gated tool's part with ``approval-responded``
    (``approval.approved`` and ``approval.reason``). Parts of calls that are not open (answered
    before, or run by the server) answer nothing.
    """
    answers: list[ClientToolResult | ApprovalResponse] = []
    for part in parts:
        call_id = str(part["toolCallId"])
        kind = open_calls.get(call_id)
        state = part.get("state")
        if kind == "client" and state == "output-available":
            answers.append(ClientToolResult(tool_call_id=call_id, result=part.get("output")))
        elif kind == "client" and state == "output-error":
            answers.append(ClientToolResult(tool_call_id=call_id, error=str(part.get("errorText") or "Tool failed")))
        elif kind in ("approval", "rerun") and state in ("approval-responded", "output-denied"):
            # A ``rerun`` (a not-retry-safe call whose outcome is unknown) is answered as an approval.
            approval = part.get("approval") or {}
            reason = approval.get("reason")
            answers.append(
                ApprovalResponse(
                    tool_call_id=call_id,
                    approved=approval.get("approved") is True,
                    reason=str(reason) if reason is not None else None,
                )
            )
    return answers
