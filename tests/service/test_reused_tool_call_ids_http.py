"""``POST /v1/sessions/{id}/tool-results`` answers the session's current call when a model used the
call's id again on a later turn (many models number their calls per response)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from helix_dbos import HelixError, LLMGenerateInput, MockLLMAdapter, ToolResultMessage, define_agent, define_tool
from helix_dbos.service import create_app
from helix_dbos.step_result import ParsedToolCall, ToolCallsStepResult
from tests.runtime.conftest import ExecutorFactory
from tests.service.conftest import AUTH, TOKEN

pytestmark = pytest.mark.postgres


class CityIn(BaseModel):
    city: str


def ask_location(city: str) -> ToolCallsStepResult:
    call = ParsedToolCall(id="call_1", name="get_location", arguments={"city": city})
    return ToolCallsStepResult(tool_calls=[call], stop_reason="tool_use")


def finish(inp: LLMGenerateInput) -> ToolCallsStepResult:
    seen = [m.content for m in inp.messages if isinstance(m, ToolResultMessage)]
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id="fin", name="__finish__", arguments={"answer": seen[-1]})],
        stop_reason="tool_use",
    )


class Out(BaseModel):
    answer: str


async def pending(client: httpx.AsyncClient, session_id: str, run_id: str) -> list[dict[str, Any]]:
    """The session's pending calls once ``run_id`` waits on them (or ended)."""
    deadline = time.time() + 10
    while time.time() < deadline:
        snapshot = (await client.get(f"/v1/sessions/{session_id}")).json()
        calls: list[dict[str, Any]] = snapshot["pending_tool_calls"]
        current = snapshot["current_run"]
        if current["run_id"] == run_id and (calls or current["status"] != "running"):
            return calls
        time.sleep(0.02)
    raise AssertionError("the run neither waited nor ended")


async def test_a_reused_call_id_is_answered_over_http_on_each_turn(make_executor: ExecutorFactory) -> None:
    location = define_tool("get_location", input_schema=CityIn, execute="client")
    agent = define_agent(
        "http-reused", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location]
    )
    executor = make_executor(MockLLMAdapter([ask_location("?"), finish, ask_location("again?"), finish]), [agent])
    app = create_app(executor, bearer_tokens=[TOKEN])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service", headers=AUTH) as client:
        first = (await client.post("/v1/runs", json={"agent": agent.name, "input": "where?"})).json()
        session_id = first["session_id"]
        try:
            await answer_each_turn(client, session_id, agent.name)
        finally:  # a run left waiting would hold a DBOS thread past the module's DBOS.destroy()
            with contextlib.suppress(HelixError):
                executor.abort(session_id, "test teardown")


async def answer_each_turn(client: httpx.AsyncClient, session_id: str, agent: str) -> None:
    """Turn 1 asks ``call_1``, answered; turn 2 asks ``call_1`` again: a new call, answered anew."""
    results = f"/v1/sessions/{session_id}/tool-results"
    for turn, (asked, city) in enumerate([("?", "Lyon"), ("again?", "Oslo")], start=1):
        run_id = f"{session_id}-turn-{turn}"
        if turn > 1:
            again = {"agent": agent, "input": "now?", "session_id": session_id}
            assert (await client.post("/v1/runs", json=again)).json()["run_id"] == run_id
        [call] = await pending(client, session_id, run_id)  # turn 2: not answered by turn 1's result
        assert (call["tool_call_id"], call["arguments"]) == ("call_1", {"city": asked})
        answer = {"kind": "client-tool-result", "tool_call_id": "call_1", "result": city}
        response = await client.post(results, json=answer)
        assert response.status_code == 202, response.text
        assert response.json()["run_id"] == run_id
        done = (await client.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 10})).json()
        assert done["output"] == {"answer": f'"{city}"'}
