"""A call id the model used before in the session: the idempotency key's shape, the suspended batch.

Pure functions over the transcript (the workflow replays it identically); the DBOS patch that keeps
runs recorded before the batch fix on their old reading is faked here.
"""

from __future__ import annotations

import pytest

from helix_dbos.messages import AssistantMessage, Message, ToolCallRequest, ToolResultMessage, UserMessage
from helix_dbos.runtime import tools
from helix_dbos.runtime.ids import REUSED_CALL_IDS_PATCH, calls_used_before
from helix_dbos.state.tracker import StateTracker
from helix_dbos.tool import create_tool_context


def ask(*call_ids: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCallRequest(id=c, name="lookup") for c in call_ids])


def result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="lookup", content="ok")


TURN_1: list[Message] = [UserMessage(content="one"), ask("c1", "c2"), result("c1"), result("c2")]


def test_a_call_id_is_reused_when_a_message_before_its_response_names_it() -> None:
    assert calls_used_before([*TURN_1], ["c1", "c2"]) == set()  # the response that called them
    turn_2 = [*TURN_1, UserMessage(content="two"), ask("c1", "c3")]
    assert calls_used_before(turn_2, ["c1", "c3"]) == {"c1"}
    assert calls_used_before([*turn_2, result("c1"), result("c3")], ["c1", "c3"]) == {"c1"}
    assert calls_used_before([UserMessage(content="x"), ask("c9")], ["c9"]) == set()


def test_the_key_is_built_on_the_call_key_when_there_is_one() -> None:
    tracker = StateTracker({})
    bare = create_tool_context(
        agent_id="r", agent_type="a", session_id="s", tool_call_id="c1", tool_name="t", state_tracker=tracker
    )
    assert bare.idempotency_key == "s:c1"
    scoped = create_tool_context(
        agent_id="r",
        agent_type="a",
        session_id="s",
        tool_call_id="c1",
        tool_name="t",
        state_tracker=tracker,
        call_key="2.3-c1",
    )
    assert scoped.idempotency_key == "s:2.3-c1"


def test_a_suspended_batch_is_read_after_its_response_only_under_the_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn 2 asks ``c1`` again and suspends: the continuation must answer it (turn 1's result is
    turn 1's call's). A run recorded before the patch replays the old reading (nothing to answer)."""
    asked: list[str] = []
    patched = True

    def patch(name: str) -> bool:
        asked.append(name)
        return patched

    monkeypatch.setattr(tools.DBOS, "patch", patch)
    suspended = [*TURN_1, UserMessage(content="two"), ask("c1", "c3"), result("c3")]
    assert [c.id for c in tools.outstanding_calls(suspended)] == ["c1"]
    assert asked == [REUSED_CALL_IDS_PATCH]
    patched = False
    assert tools.outstanding_calls(suspended) == []
    asked.clear()
    fresh = [*TURN_1, UserMessage(content="two"), ask("c4", "c3"), result("c3")]
    assert [c.id for c in tools.outstanding_calls(fresh)] == ["c4"]
    assert [c.id for c in tools.outstanding_calls(TURN_1[:2])] == ["c1", "c2"]
    assert tools.outstanding_calls(TURN_1) == []
    assert asked == []  # the readings agree: nothing is recorded


def _calls_used_before_as_first_written(messages: list[Message], call_ids: list[str]) -> set[str]:
    """The reading :func:`calls_used_before` had before it became one pass (kept to compare with)."""
    wanted = set(call_ids)
    last: dict[str, int] = {}
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or ():
                if call.id in wanted:
                    last.setdefault(call.id, index)
        if len(last) == len(wanted):
            break
    used: set[str] = set()
    for call_id, at in last.items():
        for message in messages[:at]:
            if (isinstance(message, ToolResultMessage) and message.tool_call_id == call_id) or (
                isinstance(message, AssistantMessage) and any(c.id == call_id for c in message.tool_calls or ())
            ):
                used.add(call_id)
                break
    return used


def test_calls_used_before_reads_every_transcript_as_it_always_did() -> None:
    """Random transcripts of reused, repeated and unanswered ids: the one-pass reading agrees."""
    import random

    rng = random.Random(32)
    ids = ["a", "b", "c", "d"]
    for _ in range(2000):
        messages: list[Message] = []
        for _ in range(rng.randrange(0, 9)):
            kind = rng.random()
            if kind < 0.4:
                messages.append(ask(*rng.choices(ids, k=rng.randrange(0, 3))))
            elif kind < 0.85:
                messages.append(result(rng.choice(ids)))
            else:
                messages.append(UserMessage(content="x"))
        asked = rng.sample(ids, rng.randrange(0, 4))
        assert calls_used_before(messages, asked) == _calls_used_before_as_first_written(messages, asked), messages
