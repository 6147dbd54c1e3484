"""A parent whose blocking companion waits on a human parks as ``suspended_awaiting_children`` (seed
002 ``SuspendedChildWait``) and resumes with the companion's result once the answer completes it, on
PostgreSQL with the real LiteLLM adapter.

The companion parks after a short hot window; so does its parent (and, two deep, its parent's
parent), holding no workflow. The answer, submitted to the root, continues the companion; its
continuation is still its parent's child, so its end wakes the parent, and so on up: no workers'
sweep runs here (it is the safety net of a lost wake). Each parent's ``companion__spawnAgent`` call
gets the companion's output exactly once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from dbos import DBOS

from helix_dbos import AgentHooks, LiteLLMAdapter
from helix_dbos.messages import ToolResultMessage
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service import create_app
from helix_dbos.session import SuspendedAwaitingChildrenOutcome
from helix_dbos.testing import ScriptedOpenAIServer
from tests.companions.test_hitl_routing import TOKEN, answer, make_executor, tree, wait_for_pending
from tests.runtime.conftest import ExecutorFactory

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("litellm_imported")]

__all__ = ["make_executor"]


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def spawn_results(executor: DBOSAgentExecutor, session_id: str) -> list[Any]:
    messages = executor.store.get_messages(session_id, limit=200).messages
    return [
        json.loads(m.content) if isinstance(m.content, str) else m.content
        for m in messages
        if isinstance(m, ToolResultMessage) and m.tool_name == "companion__spawnAgent"
    ]


def wait_status(executor: DBOSAgentExecutor, session_id: str, status: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session = executor.store.load_session(session_id)
        if session is not None and session.status == status:
            return
        time.sleep(0.05)
    raise AssertionError(f"{session_id} did not become {status}")


async def test_over_http_the_parked_parent_shows_suspended_awaiting_children(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    root = tree(server, 1)
    executor = make_executor(LiteLLMAdapter(), [root], hot_window_seconds=0.3)
    app = create_app(executor, bearer_tokens=[TOKEN])
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers) as http:
        started = await http.post("/v1/runs", json={"agent": "root", "input": "go", "session_id": "await-http"})
        assert started.status_code == 202, started.text
        result = (await http.get("/v1/sessions/await-http/result", params={"timeout_seconds": 30})).json()
        assert result["status"] == "suspended_awaiting_children", result
        [wait] = result["suspended"]["children"]
        assert (wait["child_session_id"], wait["parent_tool_call_id"]) == ("await-http-agent-clerk", "r1")
        snapshot = (await http.get("/v1/sessions/await-http")).json()
        assert snapshot["current_run"]["status"] == "suspended"
        [pending] = snapshot["pending_tool_calls"]
        assert pending["session_id"] == "await-http-agent-clerk"


@pytest.mark.parametrize("depth", [1, 2])
def test_a_parent_parks_awaiting_its_companion_and_resumes_with_its_result_once(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, depth: int
) -> None:
    root = tree(server, depth)
    executor = make_executor(LiteLLMAdapter(), [root], hot_window_seconds=0.3)
    root_id = f"await-{depth}"
    suspended: list[tuple[str, Any]] = []
    hooks = AgentHooks(on_agent_suspended=lambda p: suspended.append((p.status, p.extra.get("reason"))))
    handle = executor.execute(root, "go", session_id=root_id, hooks=hooks)
    first = f"{root_id}-agent-{'mid1' if depth == 2 else 'clerk'}"

    result = handle.result(timeout_seconds=30)
    assert result.status == "suspended_awaiting_children", result
    assert result.suspended is not None
    [wait] = result.suspended["children"]
    assert (wait["child_session_id"], wait["parent_tool_call_id"]) == (first, "r1")
    outcome = handle.outcome()
    assert isinstance(outcome, SuspendedAwaitingChildrenOutcome)
    assert outcome.suspended_awaiting_children["r1"].child_session_id == first
    assert suspended == [("suspended_awaiting_children", "awaiting_children")]
    run = executor.store.get_current_run(root_id)
    assert run is not None and run.status == "suspended"
    status = DBOS.get_workflow_status(run.workflow_id)
    assert status is not None and status.status == "SUCCESS"  # no workflow (and no thread) while it waits
    assert spawn_results(executor, root_id) == []  # the call stays open, no "running" result

    [call] = wait_for_pending(executor, root_id)
    executor.submit_tool_result(root_id, answer(call.tool_call_id, "Lyon"))
    wait_status(executor, root_id, "completed")

    final = executor.get_handle(root_id)
    assert final is not None and final.run_id != handle.run_id
    done = final.result(timeout_seconds=10)
    assert done.status == "completed" and "Lyon" in done.output.verdict, done
    [spawned] = spawn_results(executor, root_id)  # exactly one result for the call
    assert spawned["status"] == "completed" and "Lyon" in spawned["output"]["verdict"]
    assert [r.status for r in executor.store.list_runs(root_id)] == ["suspended", "completed"]
