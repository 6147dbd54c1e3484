"""Attachment types for multimodal tool results (seed 002 "Attachment Types"): images and files by URL or data.

They describe what a tool hands back besides its JSON result (a chart it drew, a PDF it fetched), in
the seeds' shape with snake_case fields. ``data`` is base64; ``media_type`` is required with data
(nothing else says what the bytes are) and optional with a URL.

Status: the types and their validation are here so tools can be written against the seeds'
contract; the runtime does not yet forward attachments inside tool results to the model (a tool
result is sent as JSON text). User-side files go through ``UserInputMessage.files``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Attachment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageUrlAttachment(_Attachment):
    """An image the model can fetch: ``{"type": "image-url", "url": ..., "media_type"?: ...}``."""

    type: Literal["image-url"] = "image-url"
    url: str
    media_type: str | None = None


class ImageDataAttachment(_Attachment):
    """An inline image: base64 ``data`` and its ``media_type`` (``image/png``, ...)."""

    type: Literal["image-data"] = "image-data"
    data: str
    media_type: str


class FileUrlAttachment(_Attachment):
    """A file by URL (a PDF, a CSV, ...)."""

    type: Literal["file-url"] = "file-url"
    url: str
    media_type: str | None = None


class FileDataAttachment(_Attachment):
    """An inline file: base64 ``data`` and its ``media_type``."""

    type: Literal["file-data"] = "file-data"
    data: str
    media_type: str


Attachment = Annotated[
    ImageUrlAttachment | ImageDataAttachment | FileUrlAttachment | FileDataAttachment, Field(discriminator="type")
]
"""Any attachment, discriminated by ``type``."""

AttachmentAdapter: TypeAdapter[Attachment] = TypeAdapter(Attachment)
"""Validates and serialises an :data:`Attachment` (``AttachmentAdapter.validate_python({...})``)."""

__all__ = [
    "Attachment",
    "AttachmentAdapter",
    "FileDataAttachment",
    "FileUrlAttachment",
    "ImageDataAttachment",
    "ImageUrlAttachment",
]
