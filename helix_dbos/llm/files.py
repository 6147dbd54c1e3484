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
``audio/wav``, ``audio/mpeg`` (mp3)         ``input_audio``
``text/*``, ``application/json``            a ``text`` part with the decoded UTF-8 text
==========================================  =================================================

Anything else, data that is not valid base64 (or a ``data:`` URI whose type disagrees with
``media_type``), text that is not UTF-8, or a URL for anything but an image is refused with a
``validation_error`` before the run starts (:func:`check_files`), so no file is ever dropped
silently. Whether the *model* takes images, PDFs or audio is the adapter's call (see
``LiteLLMAdapter.check_input_files``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from helix_dbos.errors import HelixError
from helix_dbos.messages import COMMON_METADATA_KEYS, FileInput, UserMessage

FileKind = Literal["image", "pdf", "audio", "text"]

FILES_METADATA_KEY = COMMON_METADATA_KEYS.FILES
"""Where a user message keeps its files (``metadata["files"]``, a list of ``FileInput`` dicts)."""

IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
TEXT_MEDIA_TYPES = frozenset({"application/json"})

_DATA_URI = re.compile(r"data:(?P<type>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<payload>.*)", re.DOTALL)
_URL = re.compile(r"https?://\S+", re.IGNORECASE)


def file_kind(media_type: str) -> FileKind | None:
    """How a media type reaches a model, or ``None`` when no model takes it."""
    mt = media_type.strip().lower()
    if mt in IMAGE_MEDIA_TYPES:
        return "image"
    if mt == "application/pdf":
        return "pdf"
    if mt in AUDIO_FORMATS:
        return "audio"
    if mt.startswith("text/") or mt in TEXT_MEDIA_TYPES:
        return "text"
    return None


def _refuse(file: FileInput, why: str) -> HelixError:
    name = f" {file.filename!r}" if file.filename else ""
    return HelixError(f"File{name} ({file.media_type}) cannot be sent to a model: {why}", code="validation_error")


def _base64_payload(file: FileInput) -> str | None:
    """The base64 payload of a file given as base64 or a ``data:`` URI; ``None`` for a URL."""
    data = file.data.strip()
    if _URL.fullmatch(data):
        return None
    match = _DATA_URI.fullmatch(data)
    if match is not None:
        declared = match["type"].strip().lower()
        if declared and declared != file.media_type.strip().lower():
            raise _refuse(file, f"its data: URI says {declared!r}")
        if ";base64" not in match["params"].lower():
            raise _refuse(file, "a data: URI must be base64-encoded (';base64,')")
        data = match["payload"]
    return data


def _decode(file: FileInput, payload: str) -> bytes:
    try:
        decoded = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise _refuse(file, "its data is not valid base64 (nor a data: URI)") from None
    if not decoded:
        raise _refuse(file, "it is empty")
    return decoded


def check_file(file: FileInput) -> FileKind:
    """Check that ``file`` can be sent to a model; returns its kind or raises ``validation_error``."""
    kind = file_kind(file.media_type)
    if kind is None:
        raise _refuse(
            file,
            "supported are images (png, jpeg, gif, webp), application/pdf, audio (wav, mp3), "
            "and text (text/*, application/json)",
        )
    payload = _base64_payload(file)
    if payload is None:
        if kind != "image":
            raise _refuse(file, "only images may be given by URL; send the file's data (base64 or a data: URI)")
        return kind
    decoded = _decode(file, payload)
    if kind == "text":
        try:
            decoded.decode("utf-8")
        except UnicodeDecodeError:
            raise _refuse(file, "a text file must be UTF-8") from None
    return kind


def check_files(files: Iterable[FileInput]) -> set[FileKind]:
    """Check every file (see :func:`check_file`); returns the kinds present."""
    return {check_file(f) for f in files}


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
    """The OpenAI / LiteLLM content part for a checked file."""
    kind = check_file(file)
    media_type = file.media_type.strip().lower()
    payload = _base64_payload(file)
    if kind == "image":
        url = file.data.strip() if payload is None else f"data:{media_type};base64,{payload}"
        return {"type": "image_url", "image_url": {"url": url}}
    assert payload is not None  # check_file refused URLs for everything but images
    if kind == "pdf":
        return {
            "type": "file",
            "file": {"file_data": f"data:{media_type};base64,{payload}", "filename": file.filename or "document.pdf"},
        }
    if kind == "audio":
        return {"type": "input_audio", "input_audio": {"data": payload, "format": AUDIO_FORMATS[media_type]}}
    text = base64.b64decode(payload).decode("utf-8")
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
