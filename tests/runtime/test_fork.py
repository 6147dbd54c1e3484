"""``executor.fork``: a session branched from any checkpoint, continued on its own, the original untouched.

Together with ``retry`` (from the fork's own checkpoint) a fork is "replay from LLM turn k": the
fork's first model call gets exactly the prompt the original's call k+1 got, and whatever it does
next never reaches the original. Real PostgreSQL, real DBOS, the durable SQL stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from helix_dbos import (
    AgentAlreadyRunningError,
    MockLLMAdapter,
    SessionNotFoundError,
    ToolContext,
    ToolResultMessage,
    define_agent,
    define_tool,
)
from helix_dbos.errors import CheckpointNotFoundError, ForkConflictError, ForkEditError
from helix_dbos.orchestration.message_builder import NOT_ANSWERED_IN_FORK_MESSAGE
from helix_dbos.runtime.aio import background_loop
from helix_dbos.stream.chunks import StreamResyncChunk
from helix_dbos.stream.sql import SqlStreamManager
from tests.runtime.conftest import ExecutorFactory


class Notes(BaseModel):
    notes: list[str] = Field(default_factory=list)


class NoteIn(BaseModel):
    text: str


def save_note(inp: NoteIn, ctx: ToolContext) -> dict[str, Any]:
    ctx.update_state(lambda draft: draft.notes.append(inp.text))
    return {"saved": inp.text}


note = define_tool("note", description="Save a note", input_schema=NoteIn, execute=save_note)
deploy = define_tool("deploy", description="Deploy", input_schema=NoteIn, execute=save_note, require_approval=True)
agent = define_agent(
    "forker",
    system_prompt="Take notes.",
    llm_config="openai/gpt-4o-mini",
    tools=[note, deploy],
    state_schema=Notes,
)


def _note(call_id: str, text: str, tokens: int = 10) -> dict[str, Any]:
    return {
        "type": "tool_calls",
        "tool_calls": [{"id": call_id, "name": "note", "arguments": {"text": text}}],
        "usage": {"input_tokens": tokens, "output_tokens": 3},
    }


def _done(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text, "should_stop": True, "stop_reason": "end_turn"}


@pytest.fixture
def streams(runtime_db: str) -> Iterator[SqlStreamManager]:
    manager = SqlStreamManager(runtime_db)
    yield manager
    background_loop.run(manager.aclose())


def _checkpoint_at(executor: Any, session_id: str, step: int) -> str:
    items = executor.store.list_checkpoints(session_id).items
    return next(c.id for c in items if c.step_count == step)


def test_replay_from_turn_k_in_a_fork_leaves_the_original_untouched(
    make_executor: ExecutorFactory, streams: SqlStreamManager
) -> None:
    model = MockLLMAdapter(
        [
            _note("a1", "a"),
            _note("b1", "b"),
            _done("done: a, b"),
            # The fork replays turn 2 and goes elsewhere from there.
            _note("z1", "z"),
            _done("done: a, z"),
        ]
    )
    executor = make_executor(model, [agent], stream_manager=streams)
    original = executor.execute(agent, "Take two notes.", session_id="fork-orig")
    assert original.result().status == "completed"
    before = executor.store.load_state("fork-orig")
    runs_before = executor.list_runs("fork-orig")
    checkpoints_before = executor.store.list_checkpoints("fork-orig")
    usage_before = executor.store.get_usage("fork-orig")
    assert before is not None and before.custom_state == {"notes": ["a", "b"]}

    turn_1 = _checkpoint_at(executor, "fork-orig", 1)
    fork = executor.fork("fork-orig", turn_1, new_session_id="fork-replay")
    assert fork.created and fork.session_id == "fork-replay" and fork.checkpoint_id == turn_1
    state = executor.get_state("fork-replay")
    assert state is not None and state.status == "completed" and state.custom_state == {"notes": ["a"]}
    assert state.messages == before.messages[:3]  # the user message, turn 1's call and its result

    replay = executor.retry("fork-replay")  # from the fork's own checkpoint: the model's turn 2 again
    result = replay.result()
    assert (result.status, result.output) == ("completed", "done: a, z")
    assert model.inputs[3].messages == model.inputs[1].messages  # the very prompt turn 2 had
    forked = executor.store.load_state("fork-replay")
    assert forked is not None and forked.custom_state == {"notes": ["a", "z"]}
    assert [r.turn for r in executor.list_runs("fork-replay")] == [1]

    # The original: transcript, state, runs, checkpoints and usage exactly as they were.
    assert executor.store.load_state("fork-orig") == before
    assert executor.list_runs("fork-orig") == runs_before
    assert executor.store.list_checkpoints("fork-orig") == checkpoints_before
    assert executor.store.get_usage("fork-orig") == usage_before


def test_execute_continues_a_fork_with_a_new_message(make_executor: ExecutorFactory, streams: SqlStreamManager) -> None:
    model = MockLLMAdapter([_note("a1", "a"), _done("first"), _done("second, in the fork")])
    executor = make_executor(model, [agent], stream_manager=streams)
    assert executor.execute(agent, "Note a.", session_id="fork-exec").result().status == "completed"
    fork = executor.fork("fork-exec")  # the latest checkpoint: the end of the run
    assert fork.created and fork.session_id != "fork-exec"
    continued = executor.execute(agent, "And then?", session_id=fork.session_id)
    assert continued.result().output == "second, in the fork"
    messages = executor.store.load_state(fork.session_id).messages  # type: ignore[union-attr]
    assert messages[-2].content == "And then?"  # type: ignore[union-attr]
    assert executor.store.get_message_count("fork-exec") == 4  # the original has none of it


def test_a_repeat_returns_the_same_fork_and_bad_requests_are_refused(make_executor: ExecutorFactory) -> None:
    model = MockLLMAdapter([_note("a1", "a"), _done("done")])
    executor = make_executor(model, [agent])
    assert executor.execute(agent, "Note a.", session_id="fork-repeat").result().status == "completed"
    turn_1 = _checkpoint_at(executor, "fork-repeat", 1)
    first = executor.fork("fork-repeat", turn_1, new_session_id="fork-repeat-f")
    again = executor.fork("fork-repeat", turn_1, new_session_id="fork-repeat-f")
    latest = executor.fork("fork-repeat", new_session_id="fork-repeat-f")  # "the latest" names this fork too
    assert first.created and not again.created and not latest.created
    assert again.session == first.session and again.fork_checkpoint_id == first.fork_checkpoint_id
    with pytest.raises(ForkConflictError):
        executor.fork("fork-repeat", _checkpoint_at(executor, "fork-repeat", 2), new_session_id="fork-repeat-f")
    with pytest.raises(ForkConflictError):
        executor.fork("fork-repeat", turn_1, new_session_id="fork-repeat")
    with pytest.raises(SessionNotFoundError):
        executor.fork("no-such-session")
    with pytest.raises(CheckpointNotFoundError):
        executor.fork("fork-repeat", "cpv1-fork-repeat-s9-t1-abc")


def test_a_session_waiting_on_a_human_forks_from_a_named_checkpoint_only(
    make_executor: ExecutorFactory, streams: SqlStreamManager
) -> None:
    model = MockLLMAdapter(
        [
            {"type": "tool_calls", "tool_calls": [{"id": "d1", "name": "deploy", "arguments": {"text": "prod"}}]},
            _done("deployed"),
        ]
    )
    executor = make_executor(model, [agent], stream_manager=streams, hot_window_seconds=0.2)
    handle = executor.execute(agent, "Deploy.", session_id="fork-hitl")
    assert handle.result().status == "suspended_client_tool"
    with pytest.raises(AgentAlreadyRunningError, match="name the checkpoint"):
        executor.fork("fork-hitl")
    waiting = _checkpoint_at(executor, "fork-hitl", 1)
    fork = executor.fork("fork-hitl", waiting, new_session_id="fork-hitl-f")
    messages = executor.store.load_state("fork-hitl-f").messages  # type: ignore[union-attr]
    closing = messages[-1]
    assert isinstance(closing, ToolResultMessage) and closing.tool_call_id == "d1"
    assert closing.content == NOT_ANSWERED_IN_FORK_MESSAGE
    assert fork.session.status == "completed" and executor.list_pending_tool_calls("fork-hitl-f") == []
    # The original still waits for its answer, and takes it.
    assert [c.tool_call_id for c in executor.list_pending_tool_calls("fork-hitl")] == ["d1"]
    continued = executor.submit_tool_result(
        "fork-hitl", {"kind": "approval-response", "tool_call_id": "d1", "approved": True}
    )
    assert continued is not None and continued.result().status == "completed"


def test_a_fork_has_its_own_stream_that_says_where_it_came_from(
    make_executor: ExecutorFactory, streams: SqlStreamManager
) -> None:
    model = MockLLMAdapter([_note("a1", "a"), _done("done")])
    executor = make_executor(model, [agent], stream_manager=streams)
    assert executor.execute(agent, "Note a.", session_id="fork-stream").result().status == "completed"
    source_records = background_loop.run(streams.read_records("fork-stream"))
    fork = executor.fork("fork-stream", new_session_id="fork-stream-f")
    executor.streams.flush()

    async def read_all() -> list[Any]:
        reader = await streams.create_reader("fork-stream-f")
        assert reader is not None
        return [chunk async for chunk in reader]  # ends: the fork's stream is ended

    chunks = background_loop.run(asyncio.wait_for(read_all(), timeout=10))
    assert len(chunks) == 1 and isinstance(chunks[0], StreamResyncChunk)
    assert (chunks[0].reason, chunks[0].checkpoint_id, chunks[0].message_count) == (
        "branch",
        fork.checkpoint_id,
        fork.session.message_count,
    )
    executor.fork("fork-stream", new_session_id="fork-stream-f")  # a repeat writes no second chunk
    executor.streams.flush()
    assert len(background_loop.run(streams.read_records("fork-stream-f"))) == 1
    assert background_loop.run(streams.read_records("fork-stream")) == source_records


def test_edited_state_in_a_fork_a_merge_patch_or_a_replacement(
    make_executor: ExecutorFactory, streams: SqlStreamManager
) -> None:
    model = MockLLMAdapter([_note("a1", "a"), _note("b1", "b"), _done("done"), _note("z1", "z"), _done("patched")])
    executor = make_executor(model, [agent], stream_manager=streams)
    assert executor.execute(agent, "Take notes.", session_id="fork-state").result().status == "completed"
    before = executor.store.load_state("fork-state")
    turn_1 = _checkpoint_at(executor, "fork-state", 1)

    history = {c.id: c for c in executor.list_checkpoints("fork-state").items}
    assert (history[turn_1].message_count, history[turn_1].state_summary) == (3, '{"notes":["a"]}')

    patched = executor.fork("fork-state", turn_1, new_session_id="fork-state-p", state_patch={"notes": ["x"], "k": 1})
    assert executor.store.load_state(patched.session_id).custom_state == {"notes": ["x"], "k": 1}  # type: ignore[union-attr]
    deleted = executor.fork("fork-state", turn_1, state_patch={"notes": None})
    assert executor.store.load_state(deleted.session_id).custom_state == {}  # type: ignore[union-attr]
    replaced = executor.fork("fork-state", turn_1, new_session_id="fork-state-r", state={"notes": ["r"]})
    fork_checkpoint = executor.store.get_checkpoint(replaced.fork_checkpoint_id)
    assert fork_checkpoint is not None and fork_checkpoint.state.custom_state == {"notes": ["r"]}
    result = executor.retry("fork-state-r").result()  # the next step runs on the edited state
    assert result.status == "completed"
    assert executor.store.load_state("fork-state-r").custom_state == {"notes": ["r", "z"]}  # type: ignore[union-attr]
    with pytest.raises(ForkEditError, match="state schema"):  # Notes.notes is a list of text
        executor.fork("fork-state", turn_1, state_patch={"notes": 5})
    assert executor.store.load_state("fork-state") == before


def test_fork_a_sub_agents_run_with_an_added_message(make_executor: ExecutorFactory) -> None:
    from helix_dbos import create_sub_agent_tool

    class Topic(BaseModel):
        topic: str

    class Findings(BaseModel):
        summary: str

    researcher = define_agent(
        "fork-researcher", system_prompt="Research.", output_schema=Findings, llm_config="openai/gpt-4o-mini"
    )
    planner = define_agent(
        "fork-planner",
        system_prompt="Delegate.",
        tools=[create_sub_agent_tool(researcher, Topic, timeout_ms=60_000)],
        llm_config="openai/gpt-4o-mini",
    )
    finish = {"type": "tool_calls", "tool_calls": [{"id": "f1", "name": "__finish__", "arguments": {"summary": "s"}}]}
    model = MockLLMAdapter(
        [
            {
                "type": "tool_calls",
                "tool_calls": [{"id": "r1", "name": "subagent__fork-researcher", "arguments": {"topic": "t"}}],
            },
            finish,
            _done("planned"),
            {
                "type": "tool_calls",
                "tool_calls": [{"id": "f2", "name": "__finish__", "arguments": {"summary": "deeper"}}],
            },
        ]
    )
    executor = make_executor(model, [planner])
    assert executor.execute(planner, "plan", session_id="fork-plan").result(timeout_seconds=30).output == "planned"
    child = "fork-plan-sub-1.1-r1"
    parent_messages = executor.store.get_messages("fork-plan", limit=100).messages
    child_messages = executor.store.get_messages(child, limit=100).messages
    refs = executor.store.get_sub_session_refs("fork-plan")

    fork = executor.fork(child, new_session_id="fork-sub-f", message="Go deeper.", message_mode="append")
    session = executor.store.load_session("fork-sub-f")
    assert session is not None and session.parent_session_id is None
    assert session.forked_from is not None and session.forked_from["source_parent_session_id"] == "fork-plan"
    result = executor.retry(fork.session_id).result(timeout_seconds=30)
    assert (result.status, result.output) == ("completed", Findings(summary="deeper"))
    assert model.inputs[-1].messages[-1].content == "Go deeper."  # type: ignore[union-attr]
    assert executor.store.get_messages("fork-plan", limit=100).messages == parent_messages
    assert executor.store.get_messages(child, limit=100).messages == child_messages
    assert executor.store.get_sub_session_refs("fork-plan") == refs
