"""Files as model input: what is accepted, and the content parts it becomes (pure; no model)."""

from __future__ import annotations

import base64
from typing import Any

import jsonschema_rs
import pytest
from fastapi import FastAPI
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helix_dbos import FileInput, HelixError, UserMessage
from helix_dbos.llm.files import check_file, file_content_part, file_kind, message_files, user_content_parts
from helix_dbos.llm.litellm.request import message_to_dict
from helix_dbos.messages import (
    EMBEDDED_DATA_PATTERN,
    IMAGE_DATA_PATTERN,
    IMAGE_MEDIA_TYPE_PATTERN,
    OTHER_MEDIA_TYPE_PATTERN,
    UserInputMessage,
)
from helix_dbos.orchestration.state_operations import input_messages
from helix_dbos.service.openapi import refine_openapi

B64 = base64.b64encode(b"\x89PNG fake").decode()


@pytest.mark.parametrize(
    ("media_type", "kind"),
    [
        ("image/png", "image"),
        ("image/jpeg", "image"),
        ("application/pdf", "pdf"),
        ("audio/mpeg", "audio"),
        ("audio/x-wav", "audio"),
        ("text/markdown", "text"),
        ("application/json", "text"),
        ("application/zip", None),
        ("video/mp4", None),
        ("text/", None),
        ("IMAGE/JPEG", None),  # media types are lower case (the schema says so)
    ],
)
def test_file_kinds(media_type: str, kind: str | None) -> None:
    assert file_kind(media_type) == kind


def _served_file_schema() -> dict[str, Any]:
    """``FileInput``'s request schema as the service serves it (after ``refine_openapi``)."""
    app = FastAPI()

    @app.post("/files")
    def take(message: UserInputMessage) -> None:  # pragma: no cover - never called
        return None

    schema = refine_openapi(app.openapi())
    component: dict[str, Any] = schema["components"]["schemas"]["FileInput"]
    return component


SERVED = jsonschema_rs.validator_for(_served_file_schema())


def accepted(file: dict[str, Any]) -> bool:
    try:
        FileInput.model_validate(file)
    except ValidationError:
        return False
    return True


CASES: list[tuple[str, str, bool]] = [
    (B64, "image/png", True),
    ("AA==", "text/plain", True),
    ("AAA=", "application/json", True),
    (f"data:image/png;base64,{B64}", "image/png", True),
    (f"data:;base64,{B64}", "image/png", True),
    (f"data:image/jpeg;base64,{B64}", "image/png", True),  # the URI's own type is not consulted
    (f"data:text/plain;charset=utf-8;base64,{B64}", "text/plain", True),
    ("https://example.com/cat.png", "image/webp", True),
    ("http://example.com/a?b=c&d=%20", "image/gif", True),
    ("https://example.com/a.pdf", "application/pdf", False),  # a URL only for an image
    ("https://example.com/a.mp3", "audio/mpeg", False),
    ("https://example.com/a b.png", "image/png", False),
    ("", "image/png", False),  # empty
    ("", "", False),  # the fuzzer's first find
    ("AAA", "text/plain", False),  # unpadded
    ("AA==\n", "text/plain", False),  # no trailing newline (Python's $ would let it through)
    ("AA ==", "text/plain", False),
    ("not base64!", "image/png", False),
    ("data:text/plain,hello", "text/plain", False),  # a data: URI must be base64
    ("AA==", "application/zip", False),
    ("AA==", "video/mp4", False),
    ("AA==", "IMAGE/PNG", False),
    ("AA==", "text/plain; charset=utf-8", False),
    ("AA==", "image/png\n", False),
    ("AA==", "text/", False),
    ("AA==", "text/\x00", False),
]


@pytest.mark.parametrize(("data", "media_type", "valid"), CASES)
def test_the_served_schema_and_the_model_agree_on_what_a_file_is(data: str, media_type: str, valid: bool) -> None:
    file = {"data": data, "media_type": media_type}
    assert accepted(file) is valid
    assert SERVED.is_valid(file) is valid


@settings(max_examples=300, deadline=None)
@given(
    data=st.one_of(
        st.from_regex(IMAGE_DATA_PATTERN, fullmatch=True),
        st.from_regex(EMBEDDED_DATA_PATTERN, fullmatch=True),
        st.text(max_size=12),
        st.sampled_from(["AA==", "https://x.io/a", "data:;base64,AA==", "AA==\n"]),
    ),
    media_type=st.one_of(
        st.from_regex(IMAGE_MEDIA_TYPE_PATTERN, fullmatch=True),
        st.from_regex(OTHER_MEDIA_TYPE_PATTERN, fullmatch=True),
        st.text(max_size=12),
    ),
    filename=st.none() | st.text(max_size=5),
)
def test_the_schema_and_the_model_agree_on_any_file(data: str, media_type: str, filename: str | None) -> None:
    """Schemathesis judges requests with this very validator; a disagreement is a conformance failure."""
    file = {"data": data, "media_type": media_type, "filename": filename}
    if filename is not None and "\x00" in filename:
        return  # NUL in text is refused by the service's text check, not by FileInput
    assert accepted(file) is SERVED.is_valid(file), file


def test_a_file_that_bypassed_validation_is_refused_before_it_is_sent() -> None:
    bogus = FileInput.model_construct(data="https://example.com/a.pdf", media_type="application/pdf")
    with pytest.raises(HelixError, match="only images may be given by URL") as caught:
        check_file(bogus)
    assert caught.value.code == "validation_error"


def test_a_data_uri_is_sent_with_the_files_media_type() -> None:
    part = file_content_part(FileInput(data=f"data:image/jpeg;base64,{B64}", media_type="image/png"))
    assert part == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}
    pdf = file_content_part(FileInput(data=f"data:;base64,{B64}", media_type="application/pdf", filename="x.pdf"))
    assert pdf["file"] == {"file_data": f"data:application/pdf;base64,{B64}", "filename": "x.pdf"}


def test_a_text_file_that_is_not_utf8_is_decoded_with_replacement_characters() -> None:
    data = base64.b64encode(b"caf\xe9 \xff ok").decode()
    part = file_content_part(FileInput(data=data, media_type="text/plain", filename="latin1.txt"))
    text = '<file name="latin1.txt" media_type="text/plain">\ncaf\ufffd \ufffd ok\n</file>'
    assert part == {"type": "text", "text": text}


def test_files_are_stored_on_the_message_and_become_parts_in_order() -> None:
    (stored,) = input_messages(
        [
            UserInputMessage(
                content="two files",
                metadata={"source": "web"},
                files=[
                    FileInput(data=B64, media_type="image/png"),
                    FileInput(data=base64.b64encode(b"RIFF").decode(), media_type="audio/wav", filename="a.wav"),
                ],
            )
        ]
    )
    assert isinstance(stored, UserMessage) and stored.metadata is not None and stored.metadata["source"] == "web"
    files = message_files(stored)
    assert [f.media_type for f in files] == ["image/png", "audio/wav"]
    parts = user_content_parts(stored.content, files)
    assert [p["type"] for p in parts] == ["text", "image_url", "input_audio"]
    assert parts[2]["input_audio"] == {"data": base64.b64encode(b"RIFF").decode(), "format": "wav"}
    # Without text, the parts are the files alone; a message without files stays plain text.
    assert [p["type"] for p in user_content_parts("", files)] == ["image_url", "input_audio"]
    assert message_to_dict(UserMessage(content="plain"), anthropic=False) == {"role": "user", "content": "plain"}


def test_an_anthropic_cache_breakpoint_goes_after_the_files() -> None:
    message = UserMessage(
        content="look",
        metadata={"files": [{"data": B64, "media_type": "image/png"}]},
        provider_options={"anthropic": {"cache_control": {"type": "ephemeral"}}},
    )
    content = message_to_dict(message, anthropic=True)["content"]
    assert "cache_control" not in content[0]
    assert content[-1]["type"] == "image_url" and content[-1]["cache_control"] == {"type": "ephemeral"}


def test_metadata_entries_that_are_not_files_are_ignored() -> None:
    message = UserMessage(content="x", metadata={"files": ["nope", {"data": B64, "media_type": "image/png"}]})
    assert [f.media_type for f in message_files(message)] == ["image/png"]
    assert message_files(UserMessage(content="x", metadata={"files": "nope"})) == []
