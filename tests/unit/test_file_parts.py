"""Files as model input: what is accepted, and the content parts it becomes (pure; no model)."""

from __future__ import annotations

import base64

import pytest

from helix_dbos import FileInput, HelixError, UserMessage
from helix_dbos.llm.files import check_file, file_kind, message_files, user_content_parts
from helix_dbos.llm.litellm_adapter import _message_to_dict
from helix_dbos.messages import UserInputMessage
from helix_dbos.orchestration.state_operations import input_messages

B64 = base64.b64encode(b"\x89PNG fake").decode()


@pytest.mark.parametrize(
    ("media_type", "kind"),
    [
        ("image/png", "image"),
        ("IMAGE/JPEG", "image"),
        ("application/pdf", "pdf"),
        ("audio/mpeg", "audio"),
        ("text/markdown", "text"),
        ("application/json", "text"),
        ("application/zip", None),
        ("video/mp4", None),
    ],
)
def test_file_kinds(media_type: str, kind: str | None) -> None:
    assert file_kind(media_type) == kind


def test_a_data_uri_must_be_base64_and_agree_with_the_media_type() -> None:
    assert check_file(FileInput(data=f"data:image/png;base64,{B64}", media_type="image/png")) == "image"
    assert check_file(FileInput(data=f"data:;base64,{B64}", media_type="image/png")) == "image"
    with pytest.raises(HelixError, match="base64-encoded"):
        check_file(FileInput(data="data:text/plain,hello", media_type="text/plain"))
    with pytest.raises(HelixError, match="it is empty"):
        check_file(FileInput(data="", media_type="image/png"))


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
    assert _message_to_dict(UserMessage(content="plain"), anthropic=False) == {"role": "user", "content": "plain"}


def test_an_anthropic_cache_breakpoint_goes_after_the_files() -> None:
    message = UserMessage(
        content="look",
        metadata={"files": [{"data": B64, "media_type": "image/png"}]},
        provider_options={"anthropic": {"cache_control": {"type": "ephemeral"}}},
    )
    content = _message_to_dict(message, anthropic=True)["content"]
    assert "cache_control" not in content[0]
    assert content[-1]["type"] == "image_url" and content[-1]["cache_control"] == {"type": "ephemeral"}


def test_metadata_entries_that_are_not_files_are_ignored() -> None:
    message = UserMessage(content="x", metadata={"files": ["nope", {"data": B64, "media_type": "image/png"}]})
    assert [f.media_type for f in message_files(message)] == ["image/png"]
    assert message_files(UserMessage(content="x", metadata={"files": "nope"})) == []
