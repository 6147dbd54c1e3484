"""Text nobody controls (model output, tool results, errors) is stored faithfully, on both backends.

NUL and lone surrogates are what PostgreSQL refuses (``text`` and ``jsonb`` reject NUL, nothing can
encode a lone surrogate as UTF-8); the store escapes them reversibly (``helix_dbos.store.codec``),
so everything below must come back exactly as it went in, through every read path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helix_dbos.messages import AssistantMessage, Message, ToolCallRequest, ToolResultMessage, UserMessage
from helix_dbos.store import SqlSessionStore, codec
from helix_dbos.store.base import PendingToolCall, StartRun, StepCommit, UsageRecord

# NUL, lone high and low surrogates, the codec's own escape character alone and in a group that
# looks like an escape, a reversed surrogate pair, and ordinary non-ASCII text.
NASTY = "a\x00b \ud800 \udfff \ufdd0 \ufdd00000 \udc00\ud800 é😀 \\u0000"


def _messages() -> list[Message]:
    return [
        AssistantMessage(
            content=f"says {NASTY}",
            tool_calls=[ToolCallRequest(id="c1", name="search", arguments={f"k{NASTY}": [NASTY, {"n": NASTY}]})],
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="search", content=f"result {NASTY}"),
    ]


def _start(store: SqlSessionStore, *, text: str = "hello") -> None:
    store.start_run(
        StartRun(
            session_id="s1",
            run_id="r1",
            workflow_id="wf-r1",
            agent_type="tester",
            new_session_state={"n": 0},
            input_messages=[UserMessage(content=text)],
            now_ms=1_000,
        )
    )


def _commit(store: SqlSessionStore, step: int, first: int, messages: list[Message], **kwargs: Any) -> Any:
    return store.commit_step(
        StepCommit(
            session_id="s1",
            run_id="r1",
            step_count=step,
            first_sequence=first,
            messages=messages,
            custom_state=kwargs.pop("state", {"n": step}),
            now_ms=1_000 + step,
            **kwargs,
        )
    )


def test_a_step_commit_stores_nul_and_lone_surrogates_faithfully(store: SqlSessionStore) -> None:
    _start(store, text=f"user {NASTY}")
    state = {"note": NASTY, f"key {NASTY}": [NASTY]}
    usage = [UsageRecord(kind="tool", name=f"tool {NASTY}", step=1, value=1.0)]
    assert _commit(store, 1, 1, _messages(), state=state, usage=usage).applied
    result = _commit(
        store,
        2,
        3,
        [AssistantMessage(content="done")],
        state=state,
        session_status="failed",
        run_status="failed",
        checkpoint_status="failed",
        output={"out": NASTY},
        error=f"boom {NASTY}",
    )
    assert result.applied

    loaded = store.load_state("s1")
    assert loaded is not None
    assert loaded.messages == [UserMessage(content=f"user {NASTY}"), *_messages(), AssistantMessage(content="done")]
    assert loaded.custom_state == state
    assert loaded.output == {"out": NASTY}
    assert loaded.error == f"boom {NASTY}"
    assert store.get_messages("s1").messages == loaded.messages
    assert store.get_message_prefix("s1", 3)[1:] == _messages()
    run = store.get_run("r1")
    assert run is not None and run.error == f"boom {NASTY}"
    assert [u.name for u in store.get_usage("s1")] == [f"tool {NASTY}"]
    checkpoint = store.get_checkpoint(result.checkpoint_id)
    assert checkpoint is not None
    assert checkpoint.state.custom_state == state and checkpoint.state.output == {"out": NASTY}
    assert checkpoint.state.error == f"boom {NASTY}"


def test_finish_run_and_interrupts_store_produced_text(store: SqlSessionStore) -> None:
    _start(store)
    assert store.request_interrupt("s1", f"stop {NASTY}", now_ms=2_000)
    flags = _commit(store, 1, 1, [AssistantMessage(content="x")])
    assert flags.interrupt_requested and flags.interrupt_reason == f"stop {NASTY}"
    store.finish_run(
        "s1",
        "r1",
        session_status="failed",
        run_status="failed",
        error=f"failed {NASTY}",
        aborted=True,
        abort_reason=f"abort {NASTY}",
        output={"partial": NASTY},
        now_ms=3_000,
    )
    session = store.load_session("s1")
    assert session is not None
    assert (session.error, session.abort_reason, session.output) == (
        f"failed {NASTY}",
        f"abort {NASTY}",
        {"partial": NASTY},
    )


def test_pending_tool_calls_store_produced_text(store: SqlSessionStore) -> None:
    _start(store)
    call = PendingToolCall(
        session_id="s1",
        tool_call_id="c1",
        run_id="r1",
        workflow_id="wf-r1",
        tool_name="ask",
        kind="client",
        arguments={"q": NASTY},
        arguments_digest="d" * 64,
        created_at=1,
    )
    store.pending.register([call])
    outcome = store.pending.submit("s1", "c1", {"kind": "client-tool-result", "result": {"a": NASTY}})
    assert outcome.call.submission == {"kind": "client-tool-result", "result": {"a": NASTY}}
    (row,) = store.pending.get("s1")
    assert row.arguments == {"q": NASTY}
    assert row.submission == {"kind": "client-tool-result", "result": {"a": NASTY}}


def test_ordinary_text_is_stored_byte_for_byte(store: SqlSessionStore) -> None:
    """The escape touches only what needs it: other text (including backslashes) is stored as is."""
    _start(store)
    plain = [AssistantMessage(content='plain "quoted" \\ back\\slash é 😀 \t\n')]
    _commit(store, 1, 1, plain)
    with store.engine.connect() as conn:
        (stored,) = conn.exec_driver_sql(
            "SELECT CAST(message AS TEXT) FROM helix_messages WHERE session_id = 's1' AND sequence = 1"
        ).one()
    assert json.loads(stored)["content"] == plain[0].content


# --- the codec itself (pure logic) ------------------------------------------------------------------

any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40) | st.sampled_from(
    ["\x00", "\ud800", "\ufdd0", "\ufdd0d800", "\ufdd00000", "\\u0000", "\\ud800"]
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | any_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_escape_round_trips_any_python_string(text: str) -> None:
    escaped = codec.escape_text(text)
    assert codec.unescape_text(escaped) == text
    escaped.encode("utf-8")  # storable: no lone surrogate left
    assert "\x00" not in escaped


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_dumps_loads_round_trips_any_json_value(value: Any) -> None:
    text = codec.dumps(value)
    text.encode("utf-8")
    assert "\\u0000" not in text.replace("\\\\", "")
    assert codec.loads(text) == value


@pytest.mark.parametrize("text", ["", "plain", "é😀", '{"a": "\\\\u0000"}'])
def test_text_without_unstorable_characters_is_unchanged(text: str) -> None:
    assert codec.escape_text(text) == text
    assert codec.escape_json_text(json.dumps(text, ensure_ascii=False)) == json.dumps(text, ensure_ascii=False)
