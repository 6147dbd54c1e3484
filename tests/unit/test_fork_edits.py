"""The pure edits a fork applies at its branch point: RFC 7396 merge patches and input replacement."""

from __future__ import annotations

import pytest

from helix_dbos.checkpoint import summarize_state
from helix_dbos.errors import ForkEditError
from helix_dbos.messages import AssistantMessage, UserMessage
from helix_dbos.orchestration.fork_edits import (
    ForkEdits,
    apply_merge_patch,
    check_edits,
    edited_state,
    edited_transcript,
)


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [  # RFC 7396 appendix A, a selection
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch(target: object, patch: object, expected: object) -> None:
    assert apply_merge_patch(target, patch) == expected


def test_edited_state_replaces_or_patches_and_conflicting_edits_are_refused() -> None:
    assert edited_state({"a": 1}, ForkEdits()) is None
    assert edited_state({"a": 1}, ForkEdits(state={"b": 2})) == {"b": 2}
    assert edited_state({"a": 1, "b": 2}, ForkEdits(state_patch={"a": None})) == {"b": 2}
    with pytest.raises(ForkEditError) as both:
        check_edits(ForkEdits(state={}, state_patch={}))
    assert both.value.code == "validation_error"
    with pytest.raises(ForkEditError):
        check_edits(ForkEdits(message="  "))


def test_a_replaced_message_drops_what_followed_the_last_user_message() -> None:
    transcript = [
        UserMessage(content="one"),
        AssistantMessage(content="reply"),
        UserMessage(content="two"),
        AssistantMessage(content="reply two"),
    ]
    assert edited_transcript(transcript, ForkEdits()) == (4, [])
    assert edited_transcript(transcript, ForkEdits(message="2")) == (2, [UserMessage(content="2")])
    assert edited_transcript(transcript, ForkEdits(message="3", message_mode="append")) == (
        4,
        [UserMessage(content="3")],
    )
    with pytest.raises(ForkEditError, match="no user message"):
        edited_transcript([AssistantMessage(content="hi")], ForkEdits(message="x"))


def test_state_summary_is_compact_and_bounded() -> None:
    assert summarize_state({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    long = summarize_state({"k": "x" * 500}, limit=40)
    assert len(long) == 40 and long.endswith("\u2026")
