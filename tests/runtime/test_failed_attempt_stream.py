"""A model attempt that fails mid-stream leaves no text for readers (on PostgreSQL, durable SQL
streams, the real LiteLLM adapter against the scripted server).

The scripted server sends a few text deltas and then drops the connection; the adapter retries
(or fails over) and calls ``on_error`` first. The dead attempt's deltas are already stored, so the
LLM step writes a ``stream_resync`` chunk starting at them: a reader that rebuilds the text
(``collect_text``) ends with the answer's text only, once, whether it attached before the failure
or after the run. A sub-agent's copy in its parent's stream gets the same chunk.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, SqlStreamManager, collect_text, create_sub_agent_tool, define_agent
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.llm.retry import RetryPolicy
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import StreamResyncChunk, TextDeltaChunk
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres

STALE = {"text": "stale words never meant", "drop_after_chunks": 3, "chunk_delay_seconds": 0.05}
"""Sends the role chunk and two deltas ("stale ", "words "), then drops the connection."""

FAST_RETRY = RetryPolicy(max_attempts=2, initial_backoff_seconds=0.05, max_backoff_seconds=0.05, jitter=0.0)


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    import_litellm()


@pytest.fixture
def durable(make_executor: ExecutorFactory, runtime_db: str) -> Iterator[Callable[..., DBOSAgentExecutor]]:
    """``durable(agents)``: an executor with the real adapter on the durable SQL streams."""
    managers: list[SqlStreamManager] = []

    def build(agents: list[Any]) -> DBOSAgentExecutor:
        managers.append(SqlStreamManager(runtime_db))
        return make_executor(LiteLLMAdapter(), agents, stream_manager=managers[-1])

    yield build
    for manager in managers:
        background_loop.run(manager.aclose())


def by_model(scripts: dict[str, list[dict[str, Any]]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        script = scripts.get(body["model"]) or [{"status": 599, "error_message": "unscripted"}]
        return script.pop(0)

    return answer


def _texts(records: list[ChunkRecord]) -> list[str]:
    return [r.chunk.content for r in records if isinstance(r.chunk, TextDeltaChunk)]


def _resyncs(records: list[ChunkRecord]) -> list[tuple[int, StreamResyncChunk]]:
    return [(r.sequence, r.chunk) for r in records if isinstance(r.chunk, StreamResyncChunk)]


async def _run_with_attached_reader(executor: DBOSAgentExecutor, agent: Any) -> tuple[str, str, Any]:
    """Start a run, attach a reader at once (before the model answers), and return what it rebuilt."""
    handle = await executor.execute_async(agent, "Hi")
    stream = await handle.stream()
    assert stream is not None
    attached = await asyncio.wait_for(collect_text(stream), timeout=30)
    result = await handle.result_async(timeout_seconds=30)
    assert result.status == "completed", result.error
    after = await handle.stream()
    assert after is not None
    return attached, await collect_text(after), handle


@pytest.mark.parametrize(
    ("scripts", "models"),
    [
        ({"primary": [STALE, {"text": "fresh answer"}]}, ["primary", "primary"]),
        ({"primary": [STALE], "backup": [{"text": "fresh answer"}]}, ["primary", "backup"]),
    ],
    ids=["retried", "fell_back"],
)
async def test_a_reader_sees_only_the_answering_attempts_text(
    durable: Callable[..., DBOSAgentExecutor], scripts: dict[str, list[dict[str, Any]]], models: list[str]
) -> None:
    retry = FAST_RETRY if models == ["primary", "primary"] else FAST_RETRY.model_copy(update={"max_attempts": 1})
    with ScriptedOpenAIServer(handler=by_model(scripts)) as server:
        agent = define_agent(
            "cut-stream",
            system_prompt="Be brief.",
            llm_config={
                "model": "openai/primary",
                "fallbacks": ["openai/backup"],
                "api_base": server.base_url,
                "api_key": "test",
                "retry": retry,
            },
        )
        executor = durable([agent])
        attached, later, handle = await _run_with_attached_reader(executor, agent)
        assert [b["model"] for b in server.requests] == models

    assert (await handle.result_async()).output == "fresh answer"
    # The dead attempt's deltas did reach the stream (stored before the connection dropped) ...
    records = executor.streams.stored_records(handle.session_id, 0)
    assert _texts(records)[:2] == ["stale ", "words "]
    # A reader attached before the failure and one reading after the run rebuild the answer's text only.
    assert attached == later == "fresh answer"
    # ... and one resync starts right before them, for the step that streamed them.
    [(at, resync)] = _resyncs(records)
    first_stale = next(r.sequence for r in records if isinstance(r.chunk, TextDeltaChunk))
    assert resync.from_sequence == first_stale - 1 and at > first_stale
    assert (resync.agent_id, resync.step, resync.reason) == (handle.run_id, 1, "crash_recovery")
    genesis = next(c for c in executor.store.list_checkpoints(handle.session_id).items if c.step_count == 0)
    assert (resync.checkpoint_id, resync.step_count) == (genesis.id, 0)


async def test_an_attempt_that_streamed_nothing_writes_no_resync(durable: Callable[..., DBOSAgentExecutor]) -> None:
    scripts = {"primary": [{"status": 503, "error_message": "busy"}, {"text": "fresh answer"}]}
    with ScriptedOpenAIServer(handler=by_model(scripts)) as server:
        agent = define_agent(
            "cut-nothing",
            system_prompt="Be brief.",
            llm_config={"model": "openai/primary", "api_base": server.base_url, "api_key": "test", "retry": FAST_RETRY},
        )
        executor = durable([agent])
        attached, _, handle = await _run_with_attached_reader(executor, agent)
        assert server.request_count == 2
    assert attached == "fresh answer"
    assert _resyncs(executor.streams.stored_records(handle.session_id, 0)) == []


class Topic(BaseModel):
    topic: str


class Summary(BaseModel):
    summary: str


async def test_a_sub_agents_failed_attempt_is_dropped_from_the_parents_copy_too(
    durable: Callable[..., DBOSAgentExecutor],
) -> None:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        asks_child = "You write." in json.dumps(messages[0])
        if asks_child:
            child_calls.append(1)
            if len(child_calls) == 1:
                return STALE
            return {"text": "fresh draft", "tool_calls": [("__finish__", {"summary": "drafted"})]}
        if not any(m["role"] == "tool" for m in messages):
            return {"tool_calls": [{"id": "call_w", "name": "subagent__writer", "arguments": {"topic": "rain"}}]}
        return {"text": " and done"}

    child_calls: list[int] = []
    with ScriptedOpenAIServer(handler=answer) as server:
        llm = {"model": "openai/fake", "api_base": server.base_url, "api_key": "test", "retry": FAST_RETRY}
        writer = define_agent("writer", system_prompt="You write.", llm_config=llm, output_schema=Summary)
        boss = define_agent(
            "boss", system_prompt="You delegate.", llm_config=llm, tools=[create_sub_agent_tool(writer, Topic)]
        )
        executor = durable([boss])
        attached, later, handle = await _run_with_attached_reader(executor, boss)
        assert len(child_calls) == 2

    # The parent's stream holds a copy of the child's chunks: the stale ones, then a resync for them.
    records = executor.streams.stored_records(handle.session_id, 0)
    assert _texts(records)[:2] == ["stale ", "words "]
    assert attached == later == "fresh draft and done"
    [(_, resync)] = _resyncs(records)
    assert resync.agent_type == "writer" and resync.agent_id != handle.run_id
    child = executor.store.get_sub_session_refs(handle.session_id)[0].sub_session_id
    child_stream = await executor.read_stream(child)
    assert child_stream is not None
    assert await collect_text(child_stream) == "fresh draft"
