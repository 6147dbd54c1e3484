"""The fault tests' harness: a scripted three-tool agent, a DBOS runtime on a crashable cluster, live readers."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import (
    DBOSAgentExecutor,
    LLMGenerateInput,
    SqlSessionStore,
    StepResult,
    define_agent,
    define_tool,
    upgrade,
)
from helix_dbos.errors import HelixError
from helix_dbos.messages import ToolResultMessage
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.launch import dbos_config_for
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.store.retry import RetryPolicy
from helix_dbos.stream.sql import SqlStreamManager
from tests import pg

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


@contextlib.contextmanager
def launched(
    cluster: pg.LocalCluster,
    *,
    retry: RetryPolicy | None = None,
    agents: list[Any] | None = None,
    llm_adapter: Any = None,
    hot_window_seconds: float = 60.0,
) -> Iterator[Env]:
    """DBOS, a store and an executor on a fresh database of ``cluster`` (one per process at a time)."""
    url = pg.create_database(cluster.url, pg.unique_name("outage"))
    upgrade(url)
    DBOS.destroy()
    config = dbos_config_for(url, executor_id="outage-test", log_level="ERROR")
    config["notification_listener_polling_interval_sec"] = 0.01
    DBOS(config=config)
    store = SqlSessionStore(url, retry=retry)
    manager = SqlStreamManager(store.engine, retry=retry)
    executor = DBOSAgentExecutor(
        store,
        llm_adapter=llm_adapter or ThreeToolModel(),
        stream_manager=manager,
        agents=agents or [agent],
        hot_window_seconds=hot_window_seconds,
    )
    DBOS.launch()
    try:
        yield Env(cluster, url, executor, manager)
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
