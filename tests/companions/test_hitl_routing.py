"""Answers routed through the root session to the companion that asked (seed 001: "Submissions
always go against the ROOT sessionId"), on PostgreSQL with the real LiteLLM adapter.

A blocking companion (and a companion of a companion) calls a client-executed tool and waits hot:
the root session lists the call with its owning session, an answer submitted to the root reaches
it (Python and HTTP), an answer to the owner's own session still works, a second answer is refused
as before, and a call id of another tree is not found through this root.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, LLMConfig, PersistentAgentConfig, define_agent, define_tool
from helix_dbos.errors import HelixError, PendingToolCallNotFoundError, ToolCallAlreadyAnsweredError
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service import create_app
from helix_dbos.testing import ScriptedOpenAIServer
from tests.companions.brain import Brain, call, tool_results
from tests.runtime.conftest import ExecutorFactory

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("litellm_imported")]

TOKEN = "routing-token-0123456789"
_OWNERSHIP_EVENTS = ("client_tool.ownership_recorded", "client_tool.ownership_routed")


class Ask(BaseModel):
    question: str


class Verdict(BaseModel):
    verdict: str


@pytest.fixture
def make_executor(make_executor: ExecutorFactory) -> Iterator[ExecutorFactory]:
    """The module's executors; a test that fails mid-wait leaves no run waiting hot past DBOS's teardown."""
    created: list[DBOSAgentExecutor] = []

    def factory(*args: Any, **kwargs: Any) -> DBOSAgentExecutor:
        created.append(make_executor(*args, **kwargs))
        return created[-1]

    yield factory
    for executor in created:
        for session in executor.store.list_sessions(status="active", limit=100):
            with contextlib.suppress(HelixError):
                executor.abort(session.session_id, "test over")


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def llm(server: ScriptedOpenAIServer) -> LLMConfig:
    return LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test", max_retries=0)


def asker(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A companion that asks the user once (client tool), then finishes with the answer."""
    results = tool_results(messages)
    if not results:
        return call("ask_user", {"question": "which city?"}, "ask-1")
    return call("__finish__", {"verdict": f"user said {results[-1]}"}, "clerk-fin")


def delegator(agent_type: str, name: str, call_id: str) -> Any:
    """A parent that spawns one blocking companion, then finishes with what it returned."""

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        results = tool_results(messages)
        if not results:
            return call("companion__spawnAgent", {"agentType": agent_type, "name": name, "message": "ask"}, call_id)
        return call("__finish__", {"verdict": f"{name}: {results[-1].get('output')}"}, f"{call_id}-fin")

    return script


def tree_agents(base_url: str, depth: int) -> Any:
    """A root whose blocking companion chain is ``depth`` deep; the deepest asks the user."""
    config = LLMConfig(model="openai/fake", api_base=base_url, api_key="test", max_retries=0)
    below = define_agent(
        "clerk",
        system_prompt="CLERK: ask the user.",
        llm_config=config,
        output_schema=Verdict,
        tools=[define_tool("ask_user", input_schema=Ask, execute="client")],
    )
    for level in range(depth - 1, 0, -1):
        below = define_agent(
            f"mid{level}",
            system_prompt=f"MID{level}: delegate.",
            llm_config=config,
            output_schema=Verdict,
            persistent_agents=[PersistentAgentConfig(agent=below, mode="blocking")],
        )
    return define_agent(
        "root",
        system_prompt="ROOT: delegate.",
        llm_config=config,
        output_schema=Verdict,
        persistent_agents=[PersistentAgentConfig(agent=below, mode="blocking")],
    )


def tree_brain(depth: int) -> Brain:
    """The scripted model of :func:`tree_agents`' agents."""
    scripts: dict[str, Any] = {"CLERK": asker}
    below_type = "clerk"
    for level in range(depth - 1, 0, -1):
        scripts[f"MID{level}"] = delegator(below_type, below_type, f"m{level}")
        below_type = f"mid{level}"
    scripts["ROOT"] = delegator(below_type, below_type, "r1")
    return Brain(scripts)


def tree(server: ScriptedOpenAIServer, depth: int) -> Any:
    server._handler = tree_brain(depth)
    return tree_agents(server.base_url, depth)


def wait_for_pending(executor: DBOSAgentExecutor, session_id: str) -> list[Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        calls = executor.list_pending_tool_calls(session_id)
        if calls:
            return calls
        time.sleep(0.05)
    raise AssertionError(f"no pending call listed on {session_id}")


def answer(call_id: str, city: str) -> dict[str, Any]:
    return {"kind": "client-tool-result", "tool_call_id": call_id, "result": {"city": city}}


@pytest.mark.parametrize("depth", [1, 2])
def test_an_answer_to_the_root_reaches_the_companion_that_asked(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="helix_dbos.lifecycle")
    root = tree(server, depth)
    executor = make_executor(LiteLLMAdapter(), [root])
    handle = executor.execute(root, "go", session_id=f"route-{depth}")
    owner = f"route-{depth}" + "".join(f"-agent-{n}" for n in ([f"mid{i}" for i in range(1, depth)] + ["clerk"]))

    [pending] = wait_for_pending(executor, handle.session_id)
    assert (pending.tool_call_id, pending.session_id, pending.tool_name) == ("ask-1", owner, "ask_user")
    executor.submit_tool_result(handle.session_id, answer("ask-1", "Lyon"))
    events = {e: [r for r in caplog.records if getattr(r, "event", None) == e] for e in _OWNERSHIP_EVENTS}
    recorded, routed = events["client_tool.ownership_recorded"], events["client_tool.ownership_routed"]
    assert [(r.session_id, r.root_session_id) for r in recorded] == [(owner, handle.session_id)]  # type: ignore[attr-defined]
    assert [(r.root_session_id, r.owner_session_id) for r in routed] == [(handle.session_id, owner)]  # type: ignore[attr-defined]

    result = handle.result(timeout_seconds=30)
    assert result.status == "completed", result
    assert "Lyon" in result.output.verdict
    with pytest.raises(ToolCallAlreadyAnsweredError):  # idempotent: the second answer changes nothing
        executor.submit_tool_result(handle.session_id, answer("ask-1", "Paris"))
    assert executor.list_pending_tool_calls(handle.session_id) == []


def test_the_owner_session_still_takes_its_answer_and_other_trees_do_not(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    root = tree(server, 1)
    executor = make_executor(LiteLLMAdapter(), [root])
    first = executor.execute(root, "go", session_id="own-a")
    second = executor.execute(root, "go", session_id="own-b")
    [call_a] = wait_for_pending(executor, "own-a")
    [call_b] = wait_for_pending(executor, "own-b")
    assert call_a.tool_call_id == call_b.tool_call_id == "ask-1"  # the same id in two trees

    executor.submit_tool_result("own-a-agent-clerk", answer("ask-1", "Oslo"))  # the owner's own session
    assert "Oslo" in first.result(timeout_seconds=30).output.verdict
    # own-a's call is answered; through own-a, own-b's open call of the same id is not reachable
    with pytest.raises(ToolCallAlreadyAnsweredError):
        executor.submit_tool_result("own-a", answer("ask-1", "Rome"))
    with pytest.raises(PendingToolCallNotFoundError):
        executor.submit_tool_result("own-a", answer("nope", "Rome"))
    assert [c.session_id for c in executor.list_pending_tool_calls("own-b")] == ["own-b-agent-clerk"]
    executor.submit_tool_result("own-b", answer("ask-1", "Bern"))
    assert "Bern" in second.result(timeout_seconds=30).output.verdict


async def test_over_http_the_root_lists_and_answers_its_companions_calls(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    root = tree(server, 2)
    executor = make_executor(LiteLLMAdapter(), [root])
    app = create_app(executor, bearer_tokens=[TOKEN])
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client:
        started = await client.post("/v1/runs", json={"agent": "root", "input": "go", "session_id": "http-route"})
        assert started.status_code == 202, started.text
        deadline = time.monotonic() + 20
        snapshot: dict[str, Any] = {}
        while time.monotonic() < deadline and not snapshot.get("pending_tool_calls"):
            snapshot = (await client.get("/v1/sessions/http-route")).json()
        [pending] = snapshot["pending_tool_calls"]
        assert pending["session_id"] == "http-route-agent-mid1-agent-clerk"
        missing = await client.post("/v1/sessions/http-route/tool-results", json=answer("other", "x"))
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "state_tool_call_not_found"
        accepted = await client.post("/v1/sessions/http-route/tool-results", json=answer("ask-1", "Gent"))
        assert accepted.status_code == 202, accepted.text
        result = (await client.get("/v1/sessions/http-route/result", params={"timeout_seconds": 30})).json()
        assert result["status"] == "completed" and "Gent" in result["output"]["verdict"]
        again = await client.post("/v1/sessions/http-route/tool-results", json=answer("ask-1", "Gent"))
        assert again.status_code == 409, again.text
