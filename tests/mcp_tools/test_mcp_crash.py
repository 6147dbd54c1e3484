"""A worker SIGKILLed in the middle of an MCP tool call: the recovered run calls again and completes.

A real worker process (``mcp_worker.py``) runs an agent whose tools come from the test MCP server
over stdio, on PostgreSQL, through the real LiteLLM adapter against the scripted model (in this
process). The MCP tool ``slow`` logs its call and then waits for a release file: the test SIGKILLs
the worker while the call is in flight, releases the server, and starts a second worker, whose
launch recovers the run. No connection was part of the recorded run: the recovered tool step starts
its own server process. The call ran at least once (the server's log), the run completes, and the
listing step is not repeated (its recorded output replays).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.messages import ToolResultMessage
from helix_dbos.testing import ScriptedOpenAIServer
from tests.mcp_tools.fixtures import calls_of, listing_sessions
from tests.pg import unique_name
from tests.worker_process import WorkerProcess, kill_then_recover, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("mcp_worker.py")


def _model(body: dict[str, Any]) -> dict[str, Any]:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool_calls": [{"id": "s1", "name": "calc__slow", "arguments": {"tag": "crash"}}]}
    return {"text": "recovered"}


def test_a_worker_killed_mid_mcp_call_recovers_and_completes(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    url = new_migrated_database("mcp_crash")
    log, release = tmp_path / "mcp.log", tmp_path / "release"
    session = f"mcp-{unique_name('s')}"
    with ScriptedOpenAIServer(handler=_model) as model:
        args = [url, model.base_url, str(log), str(release), session]

        def spawn(start: bool) -> WorkerProcess:
            if not start:
                release.touch()  # the orphaned server of the killed call may finish; the next call answers at once
            return start_worker(WORKER, [*args, "--start"] if start else args)

        kill_then_recover(spawn, lambda: bool(calls_of(log, "call")))

    slow_calls = [c for c in calls_of(log, "call") if c["tool"] == "slow"]
    assert len(slow_calls) >= 2  # the killed call, then the recovered step's own
    assert listing_sessions(log) == 1  # the recovered run replayed its recorded listing
    store = SqlSessionStore(url)
    try:
        state = store.load_state(session)
        assert state is not None and state.status == "completed" and state.output == "recovered"
        (result,) = [m for m in state.messages if isinstance(m, ToolResultMessage)]
        assert result.tool_call_id == "s1" and result.content == '{"result":"slow done: crash"}'
    finally:
        store.close()
