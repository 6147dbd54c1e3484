"""Conversation messages: the persisted transcript of a session.

Four message types discriminated by ``role`` (``system``, ``user``, ``assistant``, ``tool``), as in
the seeds. They are plain data: JSON-able, validated on the way in through one ``TypeAdapter``
(:data:`MessageAdapter`), and stored verbatim by the session store.

The transcript keeps one invariant (seed 000): every assistant tool call is followed by exactly one
tool result with the same ``tool_call_id``; see ``helix_dbos.orchestration.message_builder``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Data(BaseModel):
    """Base for persisted data models: strict about unknown fields, cheap to copy."""

    model_config = ConfigDict(extra="forbid", frozen=False)


class ThinkingContent(_Data):
    """A model's reasoning trace for one step."""

    content: str
    """The reasoning text, as streamed."""
    signature: str | None = None
    """Provider signature that must accompany the reasoning when it is sent back (Anthropic)."""
    blocks: list[dict[str, Any]] | None = None
    """Raw provider thinking blocks, replayed verbatim on the next request where a provider needs them."""


class ToolCallRequest(_Data):
    """One tool call as stored on an assistant message."""

    id: str
    """The provider's tool-call id; tool results pair with it."""
    name: str
    """Tool name; sub-agent calls carry the ``subagent__`` prefix."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed arguments; always an object (see ``coerce_tool_call_arguments``)."""


class SystemMessage(_Data):
    """System prompt. Built per step from the agent's prompt; not normally persisted."""

    role: Literal["system"] = "system"
    content: str
    metadata: dict[str, Any] | None = None
    provider_options: dict[str, dict[str, Any]] | None = None


class UserMessage(_Data):
    """A user turn."""

    role: Literal["user"] = "user"
    content: str
    metadata: dict[str, Any] | None = None
    provider_options: dict[str, dict[str, Any]] | None = None


class AssistantMessage(_Data):
    """A model turn: text, tool calls, or both, plus an optional reasoning trace."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ToolCallRequest] | None = None
    thinking: ThinkingContent | None = None
    metadata: dict[str, Any] | None = None
    provider_options: dict[str, dict[str, Any]] | None = None


class ToolResultMessage(_Data):
    """The result of one tool call, paired with the assistant's call by ``tool_call_id``."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    tool_name: str
    content: str
    """JSON text of the tool's result, or the error message when the call failed."""
    metadata: dict[str, Any] | None = None
    provider_options: dict[str, dict[str, Any]] | None = None


Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")]
"""Any transcript message, discriminated by ``role``."""

MessageAdapter: TypeAdapter[Message] = TypeAdapter(Message)
"""Validates one message from JSON-able data."""

MessagesAdapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
"""Validates a list of messages from JSON-able data."""


class FileInput(_Data):
    """A file attached to a user input message (base64 data or a data URI)."""

    data: str
    media_type: str
    filename: str | None = None


class UserInputMessage(_Data):
    """A structured user message passed to ``execute``: content plus metadata and files."""

    role: Literal["user"] = "user"
    content: str
    metadata: dict[str, Any] | None = None
    files: list[FileInput] | None = None


class COMMON_METADATA_KEYS:
    """Standard metadata keys (seed 002 "Message Metadata")."""

    SOURCE = "source"
    HIDDEN = "hidden"
    TIMESTAMP = "timestamp"
    DURATION = "duration"
    MODEL = "model"
    IS_SUB_AGENT = "is_sub_agent"
    PARENT_SESSION_ID = "parent_session_id"
    TAGS = "tags"
    MEMORY_INJECTION = "memory_injection"
    IS_ERROR = "is_error"
    """Set on tool results that carry an error rather than a result (a helix-dbos addition)."""
    FILES = "files"
    """A user message's attached files (``FileInput`` dicts), sent to the model as content parts."""


def is_system_message(message: object) -> TypeGuard[SystemMessage]:
    """True for a system message."""
    return isinstance(message, SystemMessage)


def is_user_message(message: object) -> TypeGuard[UserMessage]:
    """True for a user message."""
    return isinstance(message, UserMessage)


def is_assistant_message(message: object) -> TypeGuard[AssistantMessage]:
    """True for an assistant message."""
    return isinstance(message, AssistantMessage)


def is_tool_result_message(message: object) -> TypeGuard[ToolResultMessage]:
    """True for a tool result message."""
    return isinstance(message, ToolResultMessage)


def strip_metadata(message: Message) -> Message:
    """Return a copy of ``message`` without metadata."""
    return message.model_copy(update={"metadata": None})


def strip_thinking(messages: Iterable[Message]) -> list[Message]:
    """Return the messages with reasoning traces removed from assistant turns."""
    return [
        m.model_copy(update={"thinking": None}) if isinstance(m, AssistantMessage) and m.thinking else m
        for m in messages
    ]


def filter_by_metadata(messages: Iterable[Message], predicate: Callable[[dict[str, Any]], bool]) -> list[Message]:
    """Messages whose metadata satisfies ``predicate`` (messages without metadata never match)."""
    return [m for m in messages if m.metadata is not None and predicate(m.metadata)]


def get_messages_with_metadata_key(messages: Iterable[Message], key: str) -> list[Message]:
    """Messages whose metadata contains ``key``."""
    return [m for m in messages if m.metadata is not None and key in m.metadata]


def get_tool_results_from_messages(messages: Sequence[Message]) -> dict[str, ToolResultMessage]:
    """Map tool-call id to its result message."""
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def messages_to_jsonable(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Dump messages to JSON-able dicts, leaving out unset optional fields."""
    return [m.model_dump(mode="json", exclude_none=True) for m in messages]
