"""An executor over a store that offers only the base protocols still runs runs correctly.

The joint transactions (``helix_dbos.store.capabilities``) are fast paths: a store without them
(here the SQL store behind a wrapper that exposes exactly ``SessionStore`` / ``PendingCallStore``)
must give the same run, through more transactions. The durable stream still shares the database,
so only the store's side of each joint transaction is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SqlSessionStore, define_agent, define_tool
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.backend import Backend
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.store.base import PendingCallStore, SessionStore
from helix_dbos.stream.sql import SqlStreamManager
from tests.runtime.test_hitl import Out, calls, client_agent, finish_with_results, open_ids, wait_for

pytestmark = pytest.mark.postgres

_STORE_MEMBERS = frozenset(n for n in dir(SessionStore) if not n.startswith("_"))
_PENDING_MEMBERS = frozenset(n for n in dir(PendingCallStore) if not n.startswith("_"))


class _Only:
    """Exposes exactly ``members`` of ``inner``: what a store implementing only the base protocol has."""

    def __init__(self, inner: Any, members: frozenset[str]) -> None:
        self._inner = inner
        self._members = members

    def __getattr__(self, name: str) -> Any:
        if name in self._members:
            return getattr(self._inner, name)
        raise AttributeError(name)


class BaseProtocolStore(_Only):
    """The SQL store without ``engine``, ``start_run_with``, ``commit_step_with`` or ``pending.submit_with``."""

    def __init__(self, store: SqlSessionStore) -> None:
        super().__init__(store, _STORE_MEMBERS)
        self.pending = _Only(store.pending, _PENDING_MEMBERS)


agent = define_agent(
    "base-protocol",
    system_prompt="Call tools.",
    llm_config="scripted/base",
    tools=[define_tool("noop", execute=lambda inp, ctx: {"ok": True})],
)


def script() -> MockLLMAdapter:
    steps: list[Any] = [
        ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id=f"c{i}", name="noop", arguments={"i": i})], stop_reason="tool_use"
        )
        for i in range(3)
    ]
    return MockLLMAdapter([*steps, TextStepResult(content="done", should_stop=True, stop_reason="end_turn")])


@pytest.fixture
def sql_store(runtime_db: str) -> Iterator[SqlSessionStore]:
    store = SqlSessionStore(runtime_db)
    yield store
    store.close()


def run(executor: DBOSAgentExecutor, manager: SqlStreamManager) -> tuple[list[str], list[Any]]:
    handle = executor.execute(agent, "go")
    assert handle.result(timeout_seconds=60).status == "completed"
    wait_for(lambda: background_loop.run(manager.get_stream_info(handle.session_id)).status == "ended")  # type: ignore[union-attr]
    records = background_loop.run(manager.read_records(handle.session_id))
    messages = [m.model_dump() for m in executor.store.get_messages(handle.session_id, limit=100).messages]
    return [r.chunk.type for r in records], messages


def test_nothing_beyond_the_base_protocol_is_resolved(sql_store: SqlSessionStore) -> None:
    manager = SqlStreamManager(sql_store.engine)
    try:
        backend = Backend.resolve(manager, BaseProtocolStore(sql_store))  # type: ignore[arg-type]
        assert (backend.engine, backend.joint_start, backend.joint_commit, backend.transactional_submit) == (
            None,
            None,
            None,
            None,
        )
        assert backend.transactional_stream is manager  # the stream could join; the store cannot
        full = Backend.resolve(manager, sql_store)
        assert full.joint_start is sql_store and full.joint_commit is sql_store
        assert full.transactional_submit is sql_store.pending and full.engine is sql_store.engine
    finally:
        manager.close()


def test_a_run_over_the_base_protocol_is_the_same_run(sql_store: SqlSessionStore) -> None:
    seen: list[tuple[list[str], list[Any]]] = []
    for store in (sql_store, BaseProtocolStore(sql_store)):
        manager = SqlStreamManager(sql_store.engine)
        executor = DBOSAgentExecutor(store, llm_adapter=script(), agents=[agent], stream_manager=manager)  # type: ignore[arg-type]
        try:
            seen.append(run(executor, manager))
        finally:
            executor.close()
            manager.close()
    (fast_chunks, fast_messages), (slow_chunks, slow_messages) = seen
    assert slow_chunks == fast_chunks
    assert slow_chunks[-1] == "output" and slow_chunks.count("tool_end") == 3
    assert slow_messages == fast_messages


def test_a_hot_answer_over_the_base_protocol_wakes_its_run(sql_store: SqlSessionStore) -> None:
    hitl = client_agent("base-protocol-hitl")
    store = BaseProtocolStore(sql_store)
    with pytest.raises(ValueError, match="wake_in_submission"):  # no joint submit: refused, clearly
        DBOSAgentExecutor(store, llm_adapter=script(), wake_in_submission=True)  # type: ignore[arg-type]
    model = MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results])
    executor = DBOSAgentExecutor(store, llm_adapter=model, agents=[hitl])  # type: ignore[arg-type]
    try:
        handle = executor.execute(hitl, "where?")
        wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
        woken = executor.submit_tool_result(
            handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Lyon"}
        )
        assert woken is not None and woken.run_id == handle.run_id
        result = handle.result(timeout_seconds=30)
        assert result.status == "completed" and result.output == Out(answer='"Lyon"')
    finally:
        executor.close()
