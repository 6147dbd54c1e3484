"""Conversation messages: the persisted transcript of a session.

Four message types discriminated by ``role`` (``system``, ``user``, ``assistant``, ``tool``), as in
the seeds. They are plain data: JSON-able, validated on the way in through one ``TypeAdapter``
(:data:`MessageAdapter`), and stored verbatim by the session store.

The transcript keeps one invariant (seed 000): every assistant tool call is followed by exactly one
tool result with the same ``tool_call_id``; see ``helix_dbos.orchestration.message_builder``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator


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


# -- files -----------------------------------------------------------------------------------------------
#
# The rules for a file are plain regular expressions, so that the JSON schema of ``FileInput`` (and
# the service's OpenAPI schema) states them exactly and the validator below applies the very same
# expressions. They use only ASCII classes, literals, alternation and bounded repeats, which ECMA-262
# (JSON Schema), Rust's regex (schemathesis's validator) and Python's ``re`` read alike.

IMAGE_MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""Images: sent as ``image_url`` parts; the only files that may be given by ``http(s)://`` URL."""
AUDIO_MEDIA_TYPES = ("audio/wav", "audio/x-wav", "audio/wave", "audio/mpeg", "audio/mp3")
"""Audio: sent as ``input_audio`` parts (wav or mp3)."""
OTHER_MEDIA_TYPES = ("application/pdf", "application/json")
"""PDF (a ``file`` part) and JSON (decoded and sent as text, like ``text/*``)."""

_MEDIA_TOKEN = "[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"
"""A lower-case RFC 6838 subtype name (any ``text/<subtype>`` is taken as text)."""

IMAGE_MEDIA_TYPE_PATTERN = "^(?:image/(?:png|jpeg|gif|webp))$"
"""``media_type`` of an image."""
TEXT_MEDIA_TYPE_PATTERN = f"^(?:text/{_MEDIA_TOKEN}|application/json)$"
"""``media_type`` of a text file (sent as its decoded text)."""
OTHER_MEDIA_TYPE_PATTERN = f"^(?:application/(?:pdf|json)|audio/(?:wav|x-wav|wave|mpeg|mp3)|text/{_MEDIA_TOKEN})$"
"""``media_type`` of every other supported file (PDF, audio, text)."""

_BASE64 = "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)"
"""Padded standard base64 of at least one byte, with no whitespace."""
_URI_TOKEN = "[A-Za-z0-9!#$&^_.+-]+"
_DATA_URI = f"data:(?:{_URI_TOKEN}/{_URI_TOKEN})?(?:;{_URI_TOKEN}={_URI_TOKEN})*;base64,{_BASE64}"
"""An RFC 2397 ``data:`` URI holding base64; its own media type is not consulted (``media_type`` is)."""
_URL = "https?://[!-~]+"
"""An ``http(s)://`` URL: printable ASCII, no spaces (percent-encode anything else)."""

EMBEDDED_DATA_PATTERN = f"^(?:{_BASE64}|{_DATA_URI})$"
"""``data`` that carries the file itself: base64, or a base64 ``data:`` URI."""
IMAGE_DATA_PATTERN = f"^(?:{_BASE64}|{_DATA_URI}|{_URL})$"
"""``data`` of an image: embedded, or an ``http(s)://`` URL the provider fetches."""

_EMBEDDED_DATA = re.compile(EMBEDDED_DATA_PATTERN)
_IMAGE_DATA = re.compile(IMAGE_DATA_PATTERN)
_IMAGE_MEDIA_TYPE = re.compile(IMAGE_MEDIA_TYPE_PATTERN)
_OTHER_MEDIA_TYPE = re.compile(OTHER_MEDIA_TYPE_PATTERN)

SUPPORTED_MEDIA_TYPES = (
    "images (image/png, image/jpeg, image/gif, image/webp), application/pdf, audio (audio/wav, "
    "audio/x-wav, audio/wave, audio/mpeg, audio/mp3), and text (text/<subtype>, application/json), "
    "in lower case and without parameters"
)


def file_input_problem(data: str, media_type: str) -> str | None:
    """Why a file with this ``data`` and ``media_type`` cannot be accepted, or ``None`` when it can.

    The whole rule, and exactly what ``FileInput``'s JSON schema says (one ``anyOf`` branch for
    images, one for the rest): a supported ``media_type``; ``data`` in padded base64 or a base64
    ``data:`` URI; an ``http(s)://`` URL only for an image.
    """
    # fullmatch, not match: Python's ``$`` also matches before a final newline; ECMA-262's does not.
    image = _IMAGE_MEDIA_TYPE.fullmatch(media_type) is not None
    if not image and _OTHER_MEDIA_TYPE.fullmatch(media_type) is None:
        return f"unsupported media_type; supported are {SUPPORTED_MEDIA_TYPES}"
    if _EMBEDDED_DATA.fullmatch(data) is not None:
        return None
    if _IMAGE_DATA.fullmatch(data) is not None:
        return None if image else "only images may be given by URL; send the file's data (base64 or a data: URI)"
    return (
        "data must be padded base64 (no whitespace), a data:<type>;base64,<data> URI, "
        "or (for an image) an http(s):// URL"
    )


def _file_input_json_schema(schema: dict[str, Any]) -> None:
    """``FileInput``'s schema as two object variants, so that a schema reader sees the URL rule too."""
    properties = schema["properties"]

    def variant(title: str, media_type: str, data: str, description: str) -> dict[str, Any]:
        return {
            "type": "object",
            "title": title,
            "description": description,
            "properties": {
                "data": {**properties["data"], "type": "string", "pattern": data},
                "media_type": {**properties["media_type"], "type": "string", "pattern": media_type},
                "filename": properties["filename"],
            },
            "required": ["data", "media_type"],
            "additionalProperties": False,
        }

    image = variant(
        "ImageFileInput",
        IMAGE_MEDIA_TYPE_PATTERN,
        IMAGE_DATA_PATTERN,
        "An image: base64, a base64 data: URI, or an http(s):// URL.",
    )
    other = variant(
        "DataFileInput",
        OTHER_MEDIA_TYPE_PATTERN,
        EMBEDDED_DATA_PATTERN,
        "A PDF, audio or text file: base64 or a base64 data: URI.",
    )
    kept: dict[str, Any] = {key: schema[key] for key in ("title", "description") if key in schema}
    schema.clear()
    schema.update(kept)
    schema["anyOf"] = [image, other]


class FileInput(_Data):
    """A file attached to a user input message: its data (base64, a data URI, or an image's URL).

    Checked on construction (:func:`file_input_problem`): media types are lower case, without
    parameters; a ``data:`` URI's own media type is ignored in favour of ``media_type``. A text file
    (``text/*``, ``application/json``) that is not valid UTF-8 is decoded with replacement
    characters when it is sent. Whether the agent's *model* takes images, PDFs or audio is checked
    when a run starts (``LiteLLMAdapter.check_input_files``).
    """

    model_config = ConfigDict(json_schema_extra=_file_input_json_schema)

    data: str
    """Padded base64, a ``data:<type>;base64,<data>`` URI, or (images only) an ``http(s)://`` URL."""
    media_type: str
    """One of the supported media types (``SUPPORTED_MEDIA_TYPES``), lower case."""
    filename: str | None = None

    @model_validator(mode="after")
    def _supported(self) -> FileInput:
        problem = file_input_problem(self.data, self.media_type)
        if problem is not None:
            raise ValueError(problem)
        return self


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
