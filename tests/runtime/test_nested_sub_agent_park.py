"""A child that parks on its own child: the middle of a three-level tree (issue 32).

``top`` delegates to ``mid``, which delegates to ``leaf``, whose model call is held longer than
the hot window. So ``mid`` parks on ``leaf`` and ``top`` parks on ``mid``. When ``leaf`` ends,
``mid``'s continuation runs; it is still ``top``'s child: it mirrors its chunks to ``top``'s
stream, wakes ``top`` when it ends and keeps the deadline ``top``'s open gave it. On PostgreSQL,
the real LiteLLM adapter against the scripted server; no workers' sweep runs (only wakes).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import AgentConfig, LiteLLMAdapter, LLMConfig, SqlStreamManager, create_sub_agent_tool, define_agent
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.stream.chunks import StreamChunk
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres

HOT_WINDOW = 0.3


class Task(BaseModel):
    task: str


class Answer(BaseModel):
    answer: str


def tree(base_url: str, *, mid_timeout_ms: int | None = None) -> AgentConfig:
    """``top -> mid -> leaf``; ``mid_timeout_ms`` is the timeout of ``top``'s tool delegating to ``mid``."""
    llm = LLMConfig(model="openai/fake", api_base=base_url, api_key="test")
    leaf = define_agent("leaf", system_prompt="You are leaf.", llm_config=llm, output_schema=Answer)
    mid = define_agent(
        "mid",
        system_prompt="You are mid.",
        llm_config=llm,
        output_schema=Answer,
        tools=[create_sub_agent_tool(leaf, Task, description="Ask leaf")],
    )
    return define_agent(
        "top",
        system_prompt="You are top.",
        llm_config=llm,
        output_schema=Answer,
        tools=[create_sub_agent_tool(mid, Task, description="Ask mid", timeout_ms=mid_timeout_ms)],
    )


class Model:
    """Each agent delegates once (``top`` and ``mid``), then finishes with what it was told; ``leaf``'s
    only answer is held ``leaf_seconds``, ``mid``'s last ``mid_seconds``."""

    def __init__(self, leaf_seconds: float, mid_seconds: float = 0.0) -> None:
        self.leaf_seconds = leaf_seconds
        self.mid_seconds = mid_seconds
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        who = str(messages[0]["content"]).split("You are ")[1].split(".")[0]
        with self._lock:
            self.calls[who] = self.calls.get(who, 0) + 1
        results = [m for m in messages if m["role"] == "tool"]
        if who == "leaf":
            finish = {"id": "fin_leaf", "name": "__finish__", "arguments": {"answer": "leaf says hi"}}
            return {"tool_calls": [finish], "delay_seconds": self.leaf_seconds}
        if not results:
            child = "mid" if who == "top" else "leaf"
            return {"tool_calls": [{"id": f"ask_{child}", "name": f"subagent__{child}", "arguments": {"task": "hi"}}]}
        content = results[0]["content"]
        told = content if isinstance(content, str) else json.dumps(content)
        finish = {"id": f"fin_{who}", "name": "__finish__", "arguments": {"answer": f"{who}: {told}"}}
        return {"tool_calls": [finish], "delay_seconds": self.mid_seconds if who == "mid" else 0.0}


@pytest.fixture
def build(make_executor: ExecutorFactory, runtime_db: str) -> Iterator[Callable[..., tuple[DBOSAgentExecutor, Model]]]:
    servers: list[ScriptedOpenAIServer] = []
    managers: list[SqlStreamManager] = []

    def start(
        leaf_seconds: float, mid_seconds: float = 0.0, mid_timeout_ms: int | None = None
    ) -> tuple[DBOSAgentExecutor, Model]:
        model = Model(leaf_seconds, mid_seconds)
        servers.append(ScriptedOpenAIServer(handler=model))
        servers[-1].start()
        managers.append(SqlStreamManager(runtime_db))
        top = tree(servers[-1].base_url, mid_timeout_ms=mid_timeout_ms)
        executor = make_executor(LiteLLMAdapter(), [top], stream_manager=managers[-1], hot_window_seconds=HOT_WINDOW)
        return executor, model

    yield start
    for manager in managers:
        background_loop.run(manager.aclose())
    for server in servers:
        server.stop()


def chunks(executor: DBOSAgentExecutor, session_id: str) -> list[StreamChunk]:
    async def read() -> list[StreamChunk]:
        stream = await executor.read_stream(session_id)
        assert stream is not None
        return [chunk async for chunk in stream]

    return asyncio.run(asyncio.wait_for(read(), 10))


def wait_session(executor: DBOSAgentExecutor, session_id: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session = executor.store.load_session(session_id)
        if session is not None and session.status != "active":
            return session.status
        time.sleep(0.02)
    raise AssertionError(f"{session_id} still active after {timeout} s")


def test_a_parked_middle_child_continues_as_its_parents_child(
    build: Callable[..., tuple[DBOSAgentExecutor, Model]],
) -> None:
    executor, model = build(leaf_seconds=2.0)
    handle = executor.execute("top", "go")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    mid = f"{session}-sub-1.1-ask_mid"
    assert wait_session(executor, session, timeout=15) == "completed"  # woken by mid's end: no sweep here
    mid_session = executor.store.load_session(mid)
    assert mid_session is not None and mid_session.status == "completed"
    state = executor.get_state(session)
    assert state is not None
    assert "leaf says hi" in json.dumps(state.output)
    assert model.calls == {"top": 2, "mid": 2, "leaf": 1}
    # Every chunk mid's runs wrote, its continuation's included, reached top's stream too.
    mid_chunks = {(c.agent_id, c.type, c.step) for c in chunks(executor, mid) if c.agent_id.startswith(f"{mid}-turn-")}
    assert {run for run, _, _ in mid_chunks} == {f"{mid}-turn-1", f"{mid}-turn-2"}
    top_chunks = {(c.agent_id, c.type, c.step) for c in chunks(executor, session)}
    assert mid_chunks <= top_chunks, sorted(mid_chunks - top_chunks)


def test_a_parked_middle_childs_deadline_holds_in_its_continuation_where_it_was_lost(
    build: Callable[..., tuple[DBOSAgentExecutor, Model]],
) -> None:
    """``top`` gives ``mid`` 3 s. ``mid`` parks on ``leaf`` (1 s), and its deadline is then dropped
    from the process that kept it, as a crash of that process would; ``mid``'s continuation makes a
    model call held 20 s. The continuation keeps the deadline itself: ``mid`` is stopped at 3 s and
    ``top`` reads the timeout a parent waiting hot reads."""
    executor, model = build(leaf_seconds=1.0, mid_seconds=20.0, mid_timeout_ms=3000)
    started = time.monotonic()
    handle = executor.execute("top", "go")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    mid = f"{session}-sub-1.1-ask_mid"
    until = time.monotonic() + 10
    while (run := executor.store.get_current_run(mid)) is None or run.status != "suspended":
        assert time.monotonic() < until, "mid never parked"
        time.sleep(0.02)
    deadlines = executor._services.child_deadlines
    assert deadlines is not None
    deadlines.forget(mid)  # what a crash of the process that ran mid's first run loses
    assert wait_session(executor, session, timeout=15) == "completed"
    assert time.monotonic() - started < 10
    mid_session = executor.store.load_session(mid)
    assert mid_session is not None and mid_session.status == "failed" and mid_session.aborted
    assert model.calls["mid"] == 2  # the continuation's call was made, and cut short
    assert "timed out" in json.dumps(executor.get_state(session).output)  # type: ignore[union-attr]
