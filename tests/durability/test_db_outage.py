"""A PostgreSQL crash in the middle of many runs: every run completes and every stream is whole.

The scenario of issue 9 items 1 and 2, on real parts: one process, one DBOS, a cluster of the
module's own crashed with ``pg_ctl stop -m immediate`` while runs are in flight and started again a
few seconds later on the same port. Each run is four model calls around three tool calls, with
text streamed; a live reader follows every session's stream.

What must hold afterwards (nothing here is lenient about "most"):

- every run ``completed`` (no ``OperationalError`` recorded as a step output, no ``helix.fail_run``);
- every stream is ``ended`` and holds exactly the chunks of a run that saw no outage, with
  contiguous sequences (no chunk dropped, none doubled);
- every live reader got all those chunks in order and then its end, never an error or a hang.

The default test is bounded (a 4 s outage, 40 runs, well under a minute). ``-m chaos`` adds the
longer variants: more runs and several outages in a row.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import (
    DBOSAgentExecutor,
    LLMGenerateInput,
    ParsedToolCall,
    SqlSessionStore,
    StepResult,
    TextStepResult,
    ToolCallsStepResult,
    define_agent,
    define_tool,
    upgrade,
)
from helix_dbos.errors import HelixError
from helix_dbos.messages import ToolResultMessage
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.launch import APPLICATION_VERSION, dbos_system_database_url
from helix_dbos.stream.sql import SqlStreamManager
from tests import pg

pytestmark = pytest.mark.postgres

TOOLS_PER_RUN = 3


class WorkIn(BaseModel):
    i: int


class ThreeToolModel:
    """Streams a line of text, then calls ``work`` until it has seen three results, then answers."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        seen = sum(isinstance(m, ToolResultMessage) for m in input.messages)
        text = f"step {seen}"
        if input.callbacks is not None:
            await input.callbacks.text_delta(text)
        if seen < TOOLS_PER_RUN:
            call = ParsedToolCall(id=f"w{seen}", name="work", arguments={"i": seen})
            return ToolCallsStepResult(content=text, tool_calls=[call], stop_reason="tool_use")
        return TextStepResult(content=text, should_stop=True, stop_reason="end_turn")


@dataclass
class Effects:
    """Tool executions counted outside the engine, by (session, call index)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: dict[tuple[str, int], int] = field(default_factory=dict)
    max_delay: float = 0.0

    def work(self, inp: WorkIn, ctx: Any) -> dict[str, int]:
        time.sleep(random.uniform(0.0, self.max_delay))
        with self.lock:
            key = (ctx.session_id, inp.i)
            self.counts[key] = self.counts.get(key, 0) + 1
        return {"i": inp.i}


EFFECTS = Effects()

agent = define_agent(
    "outage-agent",
    system_prompt="Work three times.",
    llm_config="scripted/outage",
    tools=[define_tool("work", input_schema=WorkIn, execute=EFFECTS.work)],
)


@dataclass
class Env:
    cluster: pg.LocalCluster
    url: str
    executor: DBOSAgentExecutor
    manager: SqlStreamManager


@pytest.fixture(scope="module")
def env(crash_cluster: pg.LocalCluster) -> Iterator[Env]:
    url = pg.create_database(crash_cluster.url, pg.unique_name("outage"))
    upgrade(url)
    DBOS.destroy()
    DBOS(
        config={
            "name": "helix-dbos",
            "system_database_url": dbos_system_database_url(url),
            "application_version": APPLICATION_VERSION,
            "executor_id": "outage-test",
            "log_level": "ERROR",
            "notification_listener_polling_interval_sec": 0.01,
        }
    )
    store = SqlSessionStore(url)
    manager = SqlStreamManager(store.engine)
    executor = DBOSAgentExecutor(store, llm_adapter=ThreeToolModel(), stream_manager=manager, agents=[agent])
    DBOS.launch()
    try:
        yield Env(crash_cluster, url, executor, manager)
    finally:
        executor.close()
        background_loop.run(manager.aclose())
        DBOS.destroy()
        store.close()


@dataclass
class ReadResult:
    types: list[str] = field(default_factory=list)
    sequences: list[int] = field(default_factory=list)
    end: str = "hung"


class Readers:
    """One live stream reader per session, all on one event loop in a thread of their own."""

    def __init__(self, executor: DBOSAgentExecutor) -> None:
        self._executor = executor
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="outage-readers", daemon=True)
        self._thread.start()
        self.results: dict[str, ReadResult] = {}
        self._futures: list[Any] = []

    def follow(self, session_id: str) -> None:
        result = self.results[session_id] = ReadResult()
        self._futures.append(asyncio.run_coroutine_threadsafe(self._read(session_id, result), self._loop))

    async def _read(self, session_id: str, result: ReadResult) -> None:
        try:
            records = await self._executor.streams.records(session_id)
            if records is None:
                result.end = "unknown stream"
                return
            async for record in records:
                result.types.append(record.chunk.type)
                result.sequences.append(record.sequence)
            result.end = "end"
        except HelixError as exc:
            result.end = f"fail: {exc.code}: {exc.message[:200]}"
        except Exception as exc:
            result.end = f"{type(exc).__name__}: {str(exc)[:200]}"

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for future in self._futures:
            try:
                future.result(max(0.0, deadline - time.monotonic()))
            except Exception:
                future.cancel()

    def close(self) -> None:
        for future in self._futures:
            future.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def _baseline(env: Env) -> list[str]:
    """The chunk types of one run that saw no outage (every run of the test must match it)."""
    EFFECTS.max_delay = 0.0
    handle = env.executor.execute(agent, "baseline")
    assert handle.result(timeout_seconds=60).status == "completed"
    records = background_loop.run(env.manager.read_records(handle.session_id))
    return [r.chunk.type for r in records]


def _stored(env: Env, session_id: str) -> tuple[str, list[int], list[str]]:
    info = background_loop.run(env.manager.get_stream_info(session_id))
    records = background_loop.run(env.manager.read_records(session_id))
    status = info.status if info is not None else "missing"
    return status, [r.sequence for r in records], [r.chunk.type for r in records]


def run_outage_trial(
    env: Env, *, runs: int, outages: list[tuple[float, float]], max_tool_delay: float
) -> dict[str, Any]:
    """Start ``runs`` runs, crash the database per ``outages`` ((start offset, seconds)), check everything."""
    expected = _baseline(env)
    EFFECTS.max_delay = max_tool_delay
    readers = Readers(env.executor)
    handles = []
    try:
        for n in range(runs):
            handle = env.executor.execute(agent, f"run {n}")
            readers.follow(handle.session_id)
            handles.append(handle)
        started = time.monotonic()
        for offset, seconds in outages:
            time.sleep(max(0.0, started + offset - time.monotonic()))
            env.cluster.outage(seconds).join()
        results = {h.session_id: h.result(timeout_seconds=120) for h in handles}
        readers.wait(30)
    finally:
        readers.close()

    problems: list[str] = []
    for session_id, result in results.items():
        if result.status != "completed":
            problems.append(f"{session_id}: run {result.status}: {str(result.error)[:300]}")
        status, sequences, types = _stored(env, session_id)
        if status != "ended":
            problems.append(f"{session_id}: stream {status} after its run ended")
        if types != expected or sequences != list(range(1, len(expected) + 1)):
            problems.append(f"{session_id}: stored chunks {len(types)}/{len(expected)}: {types} @ {sequences}")
        read = readers.results[session_id]
        if read.end != "end" or read.types != expected:
            problems.append(f"{session_id}: reader {read.end!r} after {len(read.types)}/{len(expected)} chunks")
        for i in range(TOOLS_PER_RUN):
            if EFFECTS.counts.get((session_id, i)) != 1:
                problems.append(f"{session_id}: tool call {i} ran {EFFECTS.counts.get((session_id, i))} times")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])
    return {"runs": runs, "completed": sum(r.status == "completed" for r in results.values()), "chunks": len(expected)}


def test_runs_and_streams_survive_a_database_crash(env: Env) -> None:
    figures = run_outage_trial(env, runs=40, outages=[(1.0, 4.0)], max_tool_delay=1.5)
    assert figures["completed"] == 40


@pytest.mark.chaos
@pytest.mark.timeout(900)
@pytest.mark.parametrize("trial", range(5))
def test_many_runs_survive_repeated_database_crashes(env: Env, trial: int) -> None:
    figures = run_outage_trial(env, runs=100, outages=[(1.0, 5.0), (9.0, 3.0), (15.0, 4.0)], max_tool_delay=2.5)
    print(f"trial {trial}: {figures}")
