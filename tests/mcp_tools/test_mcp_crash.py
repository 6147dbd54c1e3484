"""A worker SIGKILLed in the middle of an MCP tool call: what the recovered run does with the call.

A real worker process (``mcp_worker.py``) runs an agent whose tools come from the test MCP server
over stdio, on PostgreSQL, through the real LiteLLM adapter against the scripted model (in this
process). The MCP tool ``slow`` logs its call and then waits for a release file: the test SIGKILLs
the worker while the call is in flight, releases the server, and starts a second worker, whose
launch recovers the run. No connection was part of the recorded run: the recovered tool step opens
its own session (a new server process). A server process started after the release also offers the
tool ``late``, so the model's requests show whether the recovered run listed the tools again.

- ``slow`` retry-safe (the default): the call runs again, and the run completes with its result.
- ``slow`` not retry-safe (the server's ``retry_safe`` leaves it out): the recovered run does not
  call the server again; the model gets the "outcome unknown" result (``unknown_outcome="report"``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.messages import ToolResultMessage
from helix_dbos.testing import ScriptedOpenAIServer
from tests.mcp_tools.fixtures import calls_of
from tests.pg import unique_name
from tests.worker_process import WorkerProcess, kill_then_recover, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("mcp_worker.py")


def _model(body: dict[str, Any]) -> dict[str, Any]:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool_calls": [{"id": "s1", "name": "calc__slow", "arguments": {"tag": "crash"}}]}
    return {"text": "recovered"}


def _kill_mid_slow_call_and_recover(url: str, tmp_path: Path, flags: list[str]) -> tuple[ToolResultMessage, Any]:
    """Run the crash; return the recovered run's result of ``s1`` and the model's requests."""
    log, release = tmp_path / "mcp.log", tmp_path / "release"
    session = f"mcp-{unique_name('s')}"
    with ScriptedOpenAIServer(handler=_model) as model:
        args = [url, model.base_url, str(log), str(release), session, *flags]

        def spawn(start: bool) -> WorkerProcess:
            if not start:
                release.touch()  # the orphaned server of the killed call may finish; the next call answers at once
            return start_worker(WORKER, [*args, "--start"] if start else args)

        kill_then_recover(spawn, lambda: bool(calls_of(log, "call")))
        requests = model.requests
    offered = [{t["function"]["name"] for t in r.get("tools", [])} for r in requests]
    assert all("calc__late" not in names for names in offered)  # the recovered run replayed its listing
    store = SqlSessionStore(url)
    try:
        state = store.load_state(session)
        assert state is not None and state.status == "completed" and state.output == "recovered"
        (result,) = [m for m in state.messages if isinstance(m, ToolResultMessage)]
        assert result.tool_call_id == "s1"
        return result, log
    finally:
        store.close()


def test_a_worker_killed_mid_mcp_call_recovers_and_completes(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    result, log = _kill_mid_slow_call_and_recover(new_migrated_database("mcp_crash"), tmp_path, [])
    slow_calls = [c for c in calls_of(log, "call") if c["tool"] == "slow"]
    assert len(slow_calls) == 2  # the killed call, then the recovered step's own
    assert slow_calls[0]["pid"] != slow_calls[1]["pid"]  # the recovered run's own server process
    assert result.content == '{"result":"slow done: crash"}'


def test_a_not_retry_safe_mcp_call_killed_mid_call_reports_its_outcome_unknown(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    result, log = _kill_mid_slow_call_and_recover(
        new_migrated_database("mcp_unsafe_crash"), tmp_path, ["--not-retry-safe"]
    )
    assert [c["tool"] for c in calls_of(log, "call")] == ["slow"]  # the server was not called again
    assert (result.metadata or {}).get("is_error")
    assert "Outcome unknown: the worker running tool 'calc__slow' stopped while the call was in flight" in (
        result.content
    )
