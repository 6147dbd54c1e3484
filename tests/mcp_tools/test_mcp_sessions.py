"""This process's MCP sessions are shared: one stdio server process serves every call, and is replaced when it dies.

Real parts: the test MCP server as a real subprocess (each stdio session is one process, whose
``pid`` the server logs with every listing and call), real DBOS runs on PostgreSQL through the
real LiteLLM adapter against the scripted model. Killing the server is a real SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.mcp.connection import call_tool, session_cache
from helix_dbos.runtime.aio import background_loop
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer
from tests.mcp_tools.fixtures import calls_of, server_pids, stdio_server
from tests.mcp_tools.test_mcp_runs import is_error, mcp_agent, tool_results
from tests.runtime.conftest import ExecutorFactory


def _adds(count: int, *, before_call: Any = None) -> Any:
    """A model that calls ``calc__add`` ``count`` times, one call per turn, then answers."""

    def turn(body: dict[str, Any]) -> dict[str, Any]:
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        if done == count:
            return {"text": f"{count} sums"}
        if before_call is not None:
            before_call(done)
        return {"tool_calls": [{"id": f"a{done}", "name": "calc__add", "arguments": {"a": done, "b": 100}}]}

    return turn


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_until(condition: Any, what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def _no_sessions_left() -> Any:
    """Each test starts and ends with no open session (closed as ``shutdown()`` closes them)."""
    background_loop.close_resources()
    yield
    background_loop.close_resources()


@pytest.mark.postgres
def test_the_calls_of_two_runs_share_one_stdio_server_process(make_executor: ExecutorFactory, tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    with ScriptedOpenAIServer(handler=_adds(3)) as model:
        agent = mcp_agent("mcp-one-process", model, [stdio_server(log)])
        executor = make_executor(LiteLLMAdapter(), [agent])
        first = executor.execute(agent, "three sums")
        assert first.result().output == "3 sums"
        second = executor.execute(agent, "three more", session_id=f"{first.session_id}-2")
        assert second.result().output == "3 sums"

    assert [m.content for m in tool_results(executor, first.session_id)] == [
        '{"result":100}',
        '{"result":101}',
        '{"result":102}',
    ]
    assert len(calls_of(log, "call")) == 6 and len(calls_of(log, "list")) == 2  # two runs: two listing steps
    (pid,) = server_pids(log)  # every listing and call of both runs: one server process
    assert _alive(pid)  # kept open for the next call (keep_alive_seconds)


@pytest.mark.postgres
def test_a_killed_stdio_server_is_replaced_on_the_next_call(make_executor: ExecutorFactory, tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"

    def kill_before_the_third_call(done: int) -> None:
        if done == 2:
            (pid,) = server_pids(log)
            os.kill(pid, signal.SIGKILL)
            _wait_until(lambda: not _alive(pid), "the server process to be gone")

    with ScriptedOpenAIServer(handler=_adds(3, before_call=kill_before_the_third_call)) as model:
        agent = mcp_agent("mcp-replaced", model, [stdio_server(log)])
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "three sums")
        assert handle.result().output == "3 sums"

    results = tool_results(executor, handle.session_id)
    assert not any(is_error(m) for m in results)  # the model never saw the dead process
    assert [m.content for m in results] == ['{"result":100}', '{"result":101}', '{"result":102}']
    first, second = server_pids(log)
    assert [c["pid"] for c in calls_of(log, "call")] == [first, first, second]


def test_an_idle_session_closes_after_its_keep_alive(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    server = stdio_server(log, keep_alive_seconds=1.5)
    assert asyncio.run(call_tool(server, "add", {"a": 1, "b": 2})).structured == {"result": 3}
    assert asyncio.run(call_tool(server, "add", {"a": 2, "b": 2})).structured == {"result": 4}
    (pid,) = server_pids(log)
    assert _alive(pid) and len(session_cache) == 1
    _wait_until(lambda: not _alive(pid), "the idle server process to end")
    assert len(session_cache) == 0


def test_shutdown_closes_the_open_sessions(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    asyncio.run(call_tool(stdio_server(log), "add", {"a": 1, "b": 2}))
    (pid,) = server_pids(log)
    assert _alive(pid)
    background_loop.close_resources()  # what shutdown() calls once DBOS and the executor are down
    assert not _alive(pid) and len(session_cache) == 0


def test_callers_on_other_threads_and_loops_share_the_session(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    server = stdio_server(log)
    results: list[Any] = []

    def call_from_own_loop(a: int) -> None:
        results.append(asyncio.run(call_tool(server, "add", {"a": a, "b": 1})).structured)

    threads = [threading.Thread(target=call_from_own_loop, args=(a,)) for a in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(r["result"] for r in results) == [1, 2, 3, 4]
    assert len(server_pids(log)) == 1  # concurrent first calls opened one session, on the owning loop
