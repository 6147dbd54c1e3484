"""An answer for a tool call the session does not have is refused at once (issue 9 item 8).

The run registers a client or approval call as pending *before* it streams the call's
``tool_start`` (and before the call shows in the session snapshot or the transcript), so a
client can only know a call id once it is registered: an unknown id on a running session is
unknown, and waiting for it to appear would only hold a server thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import httpx
import pytest
from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, define_agent, define_tool
from helix_dbos.errors import HelixError
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service import create_app
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres

TOKEN = "unknown-call-token-0123456789"


class CityIn(BaseModel):
    city: str


@pytest.fixture
def waiting(make_executor: ExecutorFactory) -> Iterator[tuple[DBOSAgentExecutor, str]]:
    """An executor whose run waits (hot) for a client tool answer; aborted at teardown."""
    agent = define_agent(
        "unknown-call-agent",
        system_prompt="x",
        llm_config="openai/fake",
        tools=[define_tool("ask_browser", input_schema=CityIn, execute="client")],
    )
    model = MockLLMAdapter(
        [
            ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id="real", name="ask_browser", arguments={"city": "?"})],
                stop_reason="tool_use",
            ),
            TextStepResult(content="ok", should_stop=True, stop_reason="end_turn"),
        ]
    )
    executor = make_executor(model, [agent], hot_window_seconds=60)
    handle = executor.execute(agent, "where?")
    deadline = time.monotonic() + 10
    while not executor.store.pending.open_calls(handle.session_id):
        assert time.monotonic() < deadline, "the run never registered its call"
        time.sleep(0.02)
    yield executor, handle.session_id
    with contextlib.suppress(HelixError):
        executor.abort(handle.session_id, "test teardown")


async def test_64_answers_for_unknown_calls_do_not_slow_other_requests(
    waiting: tuple[DBOSAgentExecutor, str],
) -> None:
    executor, session_id = waiting
    app = create_app(executor, bearer_tokens=[TOKEN])
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://service", headers=headers) as http:

        async def answer(i: int) -> httpx.Response:
            body = {"kind": "client-tool-result", "tool_call_id": f"nope-{i}", "result": i}
            return await http.post(f"/v1/sessions/{session_id}/tool-results", json=body)

        async def snapshot() -> tuple[float, httpx.Response]:
            await asyncio.sleep(0.05)  # after the answers are in flight
            started = time.monotonic()
            response = await http.get(f"/v1/sessions/{session_id}")
            return time.monotonic() - started, response

        started = time.monotonic()
        *answers, (snapshot_seconds, status) = await asyncio.gather(*(answer(i) for i in range(64)), snapshot())
        total = time.monotonic() - started

        assert status.status_code == 200 and status.json()["status"] == "active"
        assert all(r.status_code == 404 for r in answers), {r.status_code for r in answers}
        assert {r.json()["error"]["retryable"] for r in answers} == {False}
        assert "nope-3" in answers[3].json()["error"]["message"]
        assert snapshot_seconds < 1.0, f"GET /v1/sessions/{{id}} took {snapshot_seconds:.2f} s"
        assert total < 3.0, f"64 refusals took {total:.2f} s"
        # The real call is untouched and still answerable.
        assert [c.tool_call_id for c in executor.store.pending.open_calls(session_id)] == ["real"]
        accepted = await http.post(
            f"/v1/sessions/{session_id}/tool-results",
            json={"kind": "client-tool-result", "tool_call_id": "real", "result": "Oslo"},
        )
        assert accepted.status_code in (200, 202), accepted.text
