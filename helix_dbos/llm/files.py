"""Files attached to user messages, checked before a run and sent as model content parts.

``UserInputMessage.files`` (the seeds' ``FileInput``: base64 or a ``data:`` URI, plus a media type)
are stored on the user message under ``metadata["files"]`` and sent to the model with every call
that includes the message, as OpenAI-style content parts, which LiteLLM translates per provider:

==========================================  =================================================
Media type                                  Content part
==========================================  =================================================
``image/png|jpeg|gif|webp``                 ``image_url`` (a ``data:`` URL, or the file's own
                                            ``http(s)://`` URL: images may be given by URL)
``application/pdf``                         ``file`` with ``file_data`` (a ``data:`` URL) and
                                            ``filename``
``audio/wav|x-wav|wave|mpeg|mp3``          ``input_audio``
``text/*``, ``application/json``            a ``text`` part with the decoded UTF-8 text
==========================================  =================================================

What a file may be is ``FileInput``'s own rule (:func:`helix_dbos.messages.file_input_problem`),
which its JSON schema states exactly: a supported media type (lower case), ``data`` in padded base64
or a base64 ``data:`` URI (whose own media type is ignored: ``media_type`` decides), and a URL only
for an image. Anything else is refused when the request is read, so no file is ever dropped
silently. Two things are lenient on purpose, as a schema cannot state them: a text file that is not
valid UTF-8 is decoded with replacement characters (U+FFFD), and a ``data:`` URI that names another
type is sent as ``media_type``. Whether the *model* takes images, PDFs or audio is the adapter's
call (see ``LiteLLMAdapter.check_input_files``), made before a run starts.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from helix_dbos.errors import HelixError
from helix_dbos.messages import (
    AUDIO_MEDIA_TYPES,
    COMMON_METADATA_KEYS,
    IMAGE_MEDIA_TYPES,
    TEXT_MEDIA_TYPE_PATTERN,
    FileInput,
    UserMessage,
    file_input_problem,
)

FileKind = Literal["image", "pdf", "audio", "text"]

FILES_METADATA_KEY = COMMON_METADATA_KEYS.FILES
"""Where a user message keeps its files (``metadata["files"]``, a list of ``FileInput`` dicts)."""

AUDIO_FORMATS = {t: "mp3" if t in ("audio/mpeg", "audio/mp3") else "wav" for t in AUDIO_MEDIA_TYPES}
"""The ``input_audio`` format of each audio media type."""

_DATA_URI_PREFIX = re.compile(r"data:[^,]*,")
_URL = re.compile(r"https?://")
_TEXT_MEDIA_TYPE = re.compile(TEXT_MEDIA_TYPE_PATTERN)


def file_kind(media_type: str) -> FileKind | None:
    """How a media type reaches a model, or ``None`` when it is not one ``FileInput`` accepts."""
    if media_type in IMAGE_MEDIA_TYPES:
        return "image"
    if media_type == "application/pdf":
        return "pdf"
    if media_type in AUDIO_FORMATS:
        return "audio"
    if _TEXT_MEDIA_TYPE.fullmatch(media_type):
        return "text"
    return None


def check_file(file: FileInput) -> FileKind:
    """The kind of ``file``; ``validation_error`` for one that bypassed ``FileInput``'s validation.

    (``FileInput`` checks itself on construction; ``model_construct`` or a later assignment can
    still hand over one that does not hold, and that is refused here rather than sent.)
    """
    problem = file_input_problem(file.data, file.media_type)
    kind = file_kind(file.media_type)
    if problem is not None or kind is None:
        name = f" {file.filename!r}" if file.filename else ""
        raise HelixError(f"File{name} cannot be sent to a model: {problem}", code="validation_error")
    return kind


def check_files(files: Iterable[FileInput]) -> set[FileKind]:
    """Check every file (see :func:`check_file`); returns the kinds present."""
    return {check_file(f) for f in files}


def _base64_payload(file: FileInput) -> str | None:
    """The base64 payload of a checked file (base64 or a ``data:`` URI); ``None`` for a URL."""
    if _URL.match(file.data):
        return None
    prefix = _DATA_URI_PREFIX.match(file.data)
    return file.data[prefix.end() :] if prefix else file.data


def message_files(message: UserMessage) -> list[FileInput]:
    """The files stored on a user message (``metadata["files"]``); entries that are not files are skipped."""
    raw = (message.metadata or {}).get(FILES_METADATA_KEY)
    if not isinstance(raw, list):
        return []
    files: list[FileInput] = []
    for item in raw:
        try:
            files.append(FileInput.model_validate(item))
        except ValidationError:
            continue
    return files


def file_content_part(file: FileInput) -> dict[str, Any]:
    """The OpenAI / LiteLLM content part for a file."""
    kind = check_file(file)
    media_type = file.media_type
    payload = _base64_payload(file)
    if kind == "image":
        url = file.data if payload is None else f"data:{media_type};base64,{payload}"
        return {"type": "image_url", "image_url": {"url": url}}
    assert payload is not None  # only images may be URLs (FileInput)
    if kind == "pdf":
        return {
            "type": "file",
            "file": {"file_data": f"data:{media_type};base64,{payload}", "filename": file.filename or "document.pdf"},
        }
    if kind == "audio":
        return {"type": "input_audio", "input_audio": {"data": payload, "format": AUDIO_FORMATS[media_type]}}
    # Lenient on purpose (module docstring): a schema cannot say "UTF-8", and U+FFFD shows the model
    # where the bytes were not text.
    text = base64.b64decode(payload).decode("utf-8", errors="replace")
    name = file.filename or "attachment"
    return {"type": "text", "text": f'<file name="{name}" media_type="{media_type}">\n{text}\n</file>'}


def user_content_parts(text: str, files: Sequence[FileInput]) -> list[dict[str, Any]]:
    """A user message's content as parts: its text first (when any), then one part per file."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts.extend(file_content_part(f) for f in files)
    return parts


__all__ = [
    "FILES_METADATA_KEY",
    "FileKind",
    "check_file",
    "check_files",
    "file_content_part",
    "file_kind",
    "message_files",
    "user_content_parts",
]
