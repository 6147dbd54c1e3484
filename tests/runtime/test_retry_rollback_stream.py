"""A retry from a checkpoint rolls the session's stream back to it (seed 002 ``StreamResyncChunk``,
``reason: 'rollback'``; ``StreamManager.cleanupToStep`` G4 and ``StreamTruncatedError``): what
followed the checkpoint is removed, readers that had not reached it raise ``StreamTruncatedError``,
readers past it go on, and a ``stream_resync`` chunk opens the retry's part of the stream."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from helix_dbos import MockLLMAdapter, define_agent, define_tool
from helix_dbos.errors import StreamTruncatedError
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.store.sessions import SqlSessionStore
from helix_dbos.stream.base import ResumableStreamReader, StreamManager
from helix_dbos.stream.chunks import StreamResyncChunk, TextDeltaChunk
from helix_dbos.stream.memory import InMemoryStreamManager
from helix_dbos.stream.sql import SqlStreamManager

pytestmark = pytest.mark.postgres

agent = define_agent(
    "rollbacker",
    system_prompt="x",
    llm_config="openai/fake",
    tools=[define_tool("noop", execute=lambda inp, ctx: {"ok": True})],
)

Factory = Callable[[str], tuple[DBOSAgentExecutor, StreamManager]]


@pytest.fixture
def make(runtime_db: str) -> Iterator[Factory]:
    made: list[tuple[DBOSAgentExecutor, StreamManager]] = []

    def factory(kind: str) -> tuple[DBOSAgentExecutor, StreamManager]:
        store = SqlSessionStore(runtime_db)
        manager: StreamManager = SqlStreamManager(store.engine) if kind == "sql" else InMemoryStreamManager()
        model = MockLLMAdapter(
            [
                ToolCallsStepResult(
                    tool_calls=[ParsedToolCall(id="t1", name="noop", arguments={})], stop_reason="tool_use"
                ),
                TextStepResult(content="wrong answer", should_stop=True, stop_reason="end_turn"),
                TextStepResult(content="right answer", should_stop=True, stop_reason="end_turn"),
            ]
        )
        made.append((DBOSAgentExecutor(store, llm_adapter=model, agents=[agent], stream_manager=manager), manager))
        return made[-1]

    yield factory
    for executor, manager in made:
        executor.close()
        if isinstance(manager, SqlStreamManager):
            background_loop.run(manager.aclose())
        executor.store.close()


def _reader(manager: StreamManager, stream_id: str, after: int) -> ResumableStreamReader:
    reader = background_loop.run(manager.create_resumable_reader(stream_id, from_sequence=after))
    assert reader is not None
    return reader


@pytest.mark.parametrize("kind", ["memory", "sql"])
def test_retry_from_a_checkpoint_rolls_the_stream_back(make: Factory, kind: str) -> None:
    executor, manager = make(kind)
    handle = executor.execute(agent, "go")
    assert handle.result().status == "completed"
    session = executor.get_session(handle.session_id)
    assert session is not None
    stream_id = session.stream_id
    before = background_loop.run(manager.read_records(stream_id))
    wrong = [r.sequence for r in before if r.chunk.agent_id == handle.run_id and (r.chunk.step or 0) > 1]
    assert wrong, [r.chunk.type for r in before]  # step 2 wrote chunks: they follow the checkpoint
    cut = min(wrong) - 1
    latest = max(r.sequence for r in before)

    behind = _reader(manager, stream_id, 0)  # attached, has not reached what the rollback removes
    for _ in range(sum(1 for r in before if r.sequence <= cut)):
        background_loop.run(behind.__anext__())
    assert behind.current_sequence <= cut
    past = _reader(manager, stream_id, latest)  # attached past every removed chunk

    checkpoint = next(c for c in executor.store.list_checkpoints(handle.session_id).items if c.step_count == 1)
    retried = executor.retry(handle.session_id, checkpoint_id=checkpoint.id)
    assert retried.result().status == "completed"

    with pytest.raises(StreamTruncatedError) as truncated:
        background_loop.run(behind.__anext__())
    assert truncated.value.truncated_at_step == 1 and truncated.value.last_valid_sequence <= cut
    with pytest.raises(StopAsyncIteration):  # it saw everything up to the end it attached to: no error
        background_loop.run(past.__anext__())

    after = background_loop.run(manager.read_records(stream_id))
    assert all(r.sequence not in wrong for r in after)  # the dropped step's chunks are gone
    resyncs = [r for r in after if isinstance(r.chunk, StreamResyncChunk)]
    assert len(resyncs) == 1
    resync = resyncs[0].chunk
    assert isinstance(resync, StreamResyncChunk)
    assert resync.reason == "rollback" and resync.checkpoint_id == checkpoint.id
    restored = executor.store.get_checkpoint(checkpoint.id)
    assert restored is not None
    assert (resync.step_count, resync.message_count, resync.from_sequence) == (1, restored.message_count, cut)
    assert resyncs[0].sequence > latest  # sequences are never reused
    text = "".join(r.chunk.content for r in after if isinstance(r.chunk, TextDeltaChunk))
    assert "wrong answer" not in text and "right answer" in text
