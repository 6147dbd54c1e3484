"""A child that parks on its own child: the middle of a three-level tree (issue 32).

``top`` delegates to ``mid``, which delegates to ``leaf``, whose model call is held longer than
the hot window. So ``mid`` parks on ``leaf`` and ``top`` parks on ``mid``. When ``leaf`` ends,
``mid``'s continuation runs; it is still ``top``'s child: it mirrors its chunks to ``top``'s
stream, wakes ``top`` when it ends and keeps the deadline ``top``'s open gave it. On PostgreSQL,
the real LiteLLM adapter against the scripted server; the workers' sweep runs only where a test
calls it (``expire_parked_calls``), so everything else is the wakes' doing. The same after a real
SIGKILL: ``test_nested_sub_agent_park_crash.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator

import pytest
from dbos import DBOS

from helix_dbos import LiteLLMAdapter, SqlStreamManager
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.stream.chunks import StreamChunk, SubAgentStartChunk
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db
from tests.runtime.nested_agents import Model, tree
from tests.runtime.test_sub_agent_park import wait_session

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres

HOT_WINDOW = 0.3


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


def wait_parked(executor: DBOSAgentExecutor, session_id: str) -> None:
    until = time.monotonic() + 10
    while (run := executor.store.get_current_run(session_id)) is None or run.status != "suspended":
        assert time.monotonic() < until, f"{session_id} never parked"
        time.sleep(0.02)


@pytest.mark.parametrize("first_run_deleted", [False, True], ids=["recorded", "deleted-by-retention"])
def test_a_parked_middle_child_continues_as_its_parents_child(
    build: Callable[..., tuple[DBOSAgentExecutor, Model]], first_run_deleted: bool
) -> None:
    """``deleted-by-retention``: DBOS no longer has the input of ``mid``'s first run when its
    continuation starts, so the store gives its place in the tree (parent and stream)."""
    executor, model = build(leaf_seconds=3.0)  # room to delete before leaf ends, on a loaded machine
    handle = executor.execute("top", "go")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    mid = f"{session}-sub-1.1-ask_mid"
    if first_run_deleted:
        wait_parked(executor, mid)
        DBOS.delete_workflows([f"{mid}-turn-1"])
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
    top_stream = chunks(executor, session)
    top_chunks = {(c.agent_id, c.type, c.step) for c in top_stream}
    assert mid_chunks <= top_chunks, sorted(mid_chunks - top_chunks)
    # One level up only (docs/sub-agents.md): top's readers see mid start and end leaf, not leaf's own chunks.
    assert [(c.type, c.sub_agent_type) for c in top_stream if isinstance(c, SubAgentStartChunk)] == [
        ("subagent_start", "mid"),
        ("subagent_start", "leaf"),
    ]
    assert not any(c.agent_type == "leaf" for c in top_stream)


def test_a_parked_middle_childs_deadline_holds_in_its_continuation_where_it_was_lost(
    build: Callable[..., tuple[DBOSAgentExecutor, Model]],
) -> None:
    """``top`` gives ``mid`` 5 s. ``mid`` parks on ``leaf`` (2.5 s), and its deadline is then dropped
    from the process that kept it, as a crash of that process would; ``mid``'s continuation makes a
    model call held 20 s. The continuation keeps the deadline itself: ``mid`` is stopped at 5 s and
    ``top`` reads the timeout a parent waiting hot reads."""
    executor, model = build(leaf_seconds=2.5, mid_seconds=20.0, mid_timeout_ms=5000)
    started = time.monotonic()
    handle = executor.execute("top", "go")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    mid = f"{session}-sub-1.1-ask_mid"
    wait_parked(executor, mid)
    deadlines = executor._services.child_deadlines
    assert deadlines is not None
    deadlines.forget(mid)  # what a crash of the process that ran mid's first run loses
    until_continued = time.monotonic() + 10
    while executor.store.get_current_run(mid).turn != 2:  # type: ignore[union-attr]
        assert time.monotonic() < until_continued, "mid was never continued"
        time.sleep(0.02)
    assert wait_session(executor, session, timeout=15) == "completed"
    assert time.monotonic() - started < 12  # the deadline (5 s), not mid's held call (20 s more)
    mid_session = executor.store.load_session(mid)
    assert mid_session is not None and mid_session.status == "failed" and mid_session.aborted
    assert model.calls["mid"] == 2  # the continuation's call was made, and cut short
    assert "timed out" in json.dumps(executor.get_state(session).output)  # type: ignore[union-attr]


def test_the_sweep_stops_a_parked_middle_child_at_its_deadline_when_nobody_watches_it(
    build: Callable[..., tuple[DBOSAgentExecutor, Model]],
) -> None:
    """``top`` gives ``mid`` 2 s; ``leaf`` is held 30 s, so ``mid`` stays parked past its deadline, and
    the process that kept the deadline is gone (dropped, as above). The deadline recorded on
    ``top``'s reference is the workers' sweep's: it stops ``mid`` (and ``leaf`` under it), and ``top``
    is continued with the timeout a parent waiting hot reads."""
    executor, model = build(leaf_seconds=30.0, mid_timeout_ms=2000)
    handle = executor.execute("top", "go")
    assert handle.result(timeout_seconds=30).status == "suspended_awaiting_children"
    session = handle.session_id
    mid, leaf = f"{session}-sub-1.1-ask_mid", f"{session}-sub-1.1-ask_mid-sub-1.1-ask_leaf"
    wait_parked(executor, mid)
    deadlines = executor._services.child_deadlines
    assert deadlines is not None
    deadlines.forget(mid)
    [ref] = executor.store.get_sub_session_refs(session)
    assert ref.deadline_ms == ref.started_at + 2000  # recorded by top's open
    time.sleep(max(0.0, (ref.deadline_ms - time.time() * 1000) / 1000) + 0.5)
    assert executor.store.load_session(mid).status == "active"  # type: ignore[union-attr]  # nobody watched it
    executor.expire_parked_calls()
    assert executor.store.load_session(mid).aborted  # type: ignore[union-attr]
    assert executor.store.load_session(leaf).status == "failed"  # type: ignore[union-attr]
    assert wait_session(executor, session, timeout=15) == "completed"
    assert "timed out" in json.dumps(executor.get_state(session).output)  # type: ignore[union-attr]
    assert executor.expire_parked_calls() == []  # once
    assert model.calls == {"top": 2, "mid": 1, "leaf": 1}  # mid made no call after its deadline
