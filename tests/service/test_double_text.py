"""Double texting over HTTP: two posts 10 ms apart on one session, under each policy.

A live service (the app in-process through the ASGI transport, real DBOS on PostgreSQL, the real
LiteLLM adapter against the scripted OpenAI-compatible server). The model is transcript-driven: a
user message makes it call ``work`` with that text (a tool that takes 0.8 s, so the first run is in
flight when the second post arrives); a tool result makes it answer ``done: <text>``. The tests
assert the exact transcript and run records each policy promises.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import define_agent, define_tool
from helix_dbos._litellm_import import import_litellm_offline
from helix_dbos.client import HelixClient
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service import create_app
from helix_dbos.store.base import RunRecord
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory
from tests.service.conftest import serve

TOKEN = "test-token-0123456789"
WORK_SECONDS = 0.8


class WorkIn(BaseModel):
    text: str


def work(inp: WorkIn, ctx: object) -> dict[str, str]:
    time.sleep(WORK_SECONDS)
    return {"did": inp.text}


def decide(body: dict[str, Any]) -> dict[str, Any]:
    """A user message -> call ``work`` with it; a tool result -> ``done: <what it did>``."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"text": f"done: {json.loads(last['content'])['did']}"}
    content = last["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return {"tool_calls": [("work", {"text": text})]}


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAIServer]:
    import_litellm_offline()  # its first import takes seconds: in the setup, not in a run
    with ScriptedOpenAIServer(handler=decide) as server:
        yield server


class executor_fixture_state:
    queue_seen = False


@pytest.fixture
def executor(make_executor: ExecutorFactory, llm: ScriptedOpenAIServer) -> DBOSAgentExecutor:
    config = {"model": "openai/fake", "api_base": llm.base_url, "api_key": "test", "max_retries": 0}
    tool = define_tool("work", description="Do the work asked", input_schema=WorkIn, execute=work)
    agents = [
        define_agent("worker", system_prompt="Do what the user asks.", llm_config=config, tools=[tool]),
        define_agent(
            "steerable", system_prompt="Do what the user asks.", llm_config=config, tools=[tool], double_text="steer"
        ),
    ]
    executor = make_executor(LiteLLMAdapter(), agents)
    executor.client.double_text.register_queue()
    if not getattr(executor_fixture_state, "queue_seen", False):
        time.sleep(1.1)  # DBOS's queue thread picks a newly declared queue up within a second
        executor_fixture_state.queue_seen = True
    return executor


@pytest.fixture
async def client(executor: DBOSAgentExecutor) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(executor, bearer_tokens=[TOKEN])
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://service", headers=headers) as http:
        yield http


async def two_posts(
    client: httpx.AsyncClient, session_id: str, policy: str | None, agent: str = "worker"
) -> tuple[httpx.Response, httpx.Response]:
    """``first`` then, 10 ms later, ``second`` (under ``policy``) on one session."""
    first = await client.post("/v1/chat", json={"agent": agent, "message": "first", "session_id": session_id})
    assert first.status_code == 202, first.text
    await asyncio.sleep(0.01)
    body: dict[str, Any] = {"agent": agent, "message": "second", "session_id": session_id}
    if policy is not None:
        body["double_text"] = policy
    return first, await client.post("/v1/chat", json=body)


def settled(executor: DBOSAgentExecutor, session_id: str, runs: int, timeout: float = 60) -> list[RunRecord]:
    """The session's runs once there are ``runs`` of them and the session is not active."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The session first: once it is idle, the runs read after it are final (read the other way
        # round, a run could end between the two reads and be seen still running).
        session = executor.get_session(session_id)
        found = executor.list_runs(session_id)
        # A queued message's ticket starts its run only after the session went idle: the session
        # may be read idle just before that run appears, so a run still running is not settled.
        idle = session is not None and session.status != "active"
        if len(found) >= runs and idle and all(run.status != "running" for run in found):
            return found
        time.sleep(0.05)
    raise AssertionError(f"not settled: {executor.list_runs(session_id)}")


def transcript(executor: DBOSAgentExecutor, session_id: str) -> list[tuple[Any, ...]]:
    """The transcript without ids: (role, text or tool calls or tool result)."""
    state = executor.get_state(session_id)
    assert state is not None
    out: list[tuple[Any, ...]] = []
    for m in state.messages:
        if m.role == "user":
            out.append(("user", m.content))
        elif m.role == "assistant" and m.tool_calls:
            out.append(("call", *[(c.name, c.arguments["text"]) for c in m.tool_calls]))
        elif m.role == "assistant":
            out.append(("assistant", m.content))
        elif m.role == "tool":
            out.append(("tool", json.loads(m.content)["did"]))
    return out


def turn_of(text: str) -> list[tuple[Any, ...]]:
    return [("call", ("work", text)), ("tool", text), ("assistant", f"done: {text}")]


def runs_of(found: list[RunRecord]) -> list[tuple[str, str, str, str | None]]:
    return [(r.run_id.rsplit("-", 1)[-1], r.mode, r.status, r.previous_run_id) for r in found]


async def test_reject_is_the_default_409(client: httpx.AsyncClient, executor: DBOSAgentExecutor) -> None:
    first, second = await two_posts(client, "dt-reject", None)
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "state_already_running"
    assert first.json()["double_text"] == {
        "policy": "reject",
        "status": "started",
        "run_id": "dt-reject-turn-1",
        "position": 0,
        "ticket_id": None,
    }
    found = settled(executor, "dt-reject", 1)
    assert runs_of(found) == [("1", "execute", "completed", None)]
    assert transcript(executor, "dt-reject") == [("user", "first"), *turn_of("first")]


async def test_enqueue_runs_the_second_message_as_the_next_turn(
    client: httpx.AsyncClient, executor: DBOSAgentExecutor
) -> None:
    _, second = await two_posts(client, "dt-enqueue", "enqueue")
    assert second.status_code == 202, second.text
    receipt = second.json()["double_text"]
    assert receipt["status"] == "queued" and receipt["position"] == 1
    assert receipt["run_id"] == second.json()["run_id"] == "dt-enqueue-turn-2"
    found = settled(executor, "dt-enqueue", 2)
    assert runs_of(found) == [
        ("1", "execute", "completed", None),
        ("2", "execute", "completed", "dt-enqueue-turn-1"),
    ]
    assert transcript(executor, "dt-enqueue") == [
        ("user", "first"),
        *turn_of("first"),
        ("user", "second"),
        *turn_of("second"),
    ]


async def test_enqueue_keeps_the_order_of_several_messages(
    client: httpx.AsyncClient, executor: DBOSAgentExecutor
) -> None:
    await client.post("/v1/chat", json={"agent": "worker", "message": "first", "session_id": "dt-order"})
    receipts = []
    for text in ("second", "third", "fourth"):
        await asyncio.sleep(0.01)
        body = {"agent": "worker", "message": text, "session_id": "dt-order", "double_text": "enqueue"}
        receipts.append((await client.post("/v1/chat", json=body)).json()["double_text"])
    assert [(r["position"], r["run_id"]) for r in receipts] == [
        (1, "dt-order-turn-2"),
        (2, "dt-order-turn-3"),
        (3, "dt-order-turn-4"),
    ]
    found = settled(executor, "dt-order", 4)
    assert [r.status for r in found] == ["completed"] * 4
    expected: list[tuple[Any, ...]] = []
    for text in ("first", "second", "third", "fourth"):
        expected += [("user", text), *turn_of(text)]
    assert transcript(executor, "dt-order") == expected


async def test_interrupt_stops_the_run_keeps_its_transcript_and_resumes_with_the_message(
    client: httpx.AsyncClient, executor: DBOSAgentExecutor
) -> None:
    _, second = await two_posts(client, "dt-interrupt", "interrupt")
    assert second.status_code == 202, second.text
    assert second.json()["double_text"]["run_id"] == "dt-interrupt-turn-2"
    found = settled(executor, "dt-interrupt", 2)
    assert runs_of(found) == [
        ("1", "execute", "interrupted", None),
        ("2", "resume", "completed", "dt-interrupt-turn-1"),
    ]
    # The first run stops at a step boundary: after its tool, before its next model call (or,
    # had the interrupt come before its first model call, right after its input).
    kept = [("call", ("work", "first")), ("tool", "first")] if found[0].step_count else []
    assert transcript(executor, "dt-interrupt") == [("user", "first"), *kept, ("user", "second"), *turn_of("second")]


async def test_rollback_drops_the_running_turn_and_runs_the_message_in_its_place(
    client: httpx.AsyncClient, executor: DBOSAgentExecutor
) -> None:
    _, second = await two_posts(client, "dt-rollback", "rollback")
    assert second.status_code == 202, second.text
    assert second.json()["double_text"]["run_id"] == "dt-rollback-turn-2"
    found = settled(executor, "dt-rollback", 2)
    assert runs_of(found) == [
        ("1", "execute", "failed", None),
        ("2", "retry", "completed", "dt-rollback-turn-1"),
    ]
    assert found[0].error == "aborted: rolled back by a double text"
    assert transcript(executor, "dt-rollback") == [("user", "second"), *turn_of("second")]


async def test_steer_delivers_the_message_before_the_next_model_call(
    client: httpx.AsyncClient, executor: DBOSAgentExecutor
) -> None:
    _, second = await two_posts(client, "dt-steer", "steer", agent="steerable")
    assert second.status_code == 202, second.text
    receipt = second.json()["double_text"]
    assert receipt["status"] == "steering" and receipt["run_id"] == "dt-steer-turn-1"
    found = settled(executor, "dt-steer", 1)
    assert runs_of(found) == [("1", "execute", "completed", None)]
    took_first = [("call", ("work", "first")), ("tool", "first")] if found[0].step_count > 2 else []
    assert transcript(executor, "dt-steer") == [("user", "first"), *took_first, ("user", "second"), *turn_of("second")]


async def test_steer_into_a_run_that_does_not_listen_runs_as_the_next_turn(
    client: httpx.AsyncClient, executor: DBOSAgentExecutor
) -> None:
    _, second = await two_posts(client, "dt-steer-deaf", "steer")
    assert second.json()["double_text"]["status"] == "queued"
    found = settled(executor, "dt-steer-deaf", 2)
    assert [r.status for r in found] == ["completed", "completed"]
    assert transcript(executor, "dt-steer-deaf") == [
        ("user", "first"),
        *turn_of("first"),
        ("user", "second"),
        *turn_of("second"),
    ]


async def test_an_unknown_policy_is_a_422(client: httpx.AsyncClient) -> None:
    body = {"agent": "worker", "message": "hi", "double_text": "later"}
    response = await client.post("/v1/chat", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


def ui_post(text: str, message_id: str) -> dict[str, Any]:
    """What ``useChat``'s ``DefaultChatTransport`` posts for a new user message of chat ``dt-ui``."""
    parts = [{"type": "text", "text": text}]
    return {"id": "dt-ui", "agent": "worker", "messages": [{"id": message_id, "role": "user", "parts": parts}]}


def ui_parts(response: httpx.Response) -> list[dict[str, Any]]:
    lines = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


async def until_a_worker_session_is_active(client: httpx.AsyncClient, timeout: float = 30) -> None:
    """Wait for the first post's run to be in flight.

    The AI SDK route answers with the whole stream, so the first post is a task still going; on a
    loaded machine its run can take longer than 10 ms to start, and a second post arriving first
    would itself start turn 1 (and the first, under ``reject``, get the 409).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        params = {"status": "active", "agent": "worker"}
        if (await client.get("/v1/sessions", params=params)).json()["items"]:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the first post's run never started")


async def test_ai_sdk_route_enqueues_by_header_and_replies_with_the_run_that_carries_it(
    client: httpx.AsyncClient, executor: DBOSAgentExecutor
) -> None:
    first = asyncio.create_task(client.post("/v1/chat/ui", json=ui_post("first", "u1")))
    await until_a_worker_session_is_active(client)
    await asyncio.sleep(0.01)
    headers = {"X-Helix-Double-Text": "enqueue"}
    second = await client.post("/v1/chat/ui", json=ui_post("second", "u2"), headers=headers)
    replies = [ui_parts(await first), ui_parts(second)]
    for parts, text, turn in zip(replies, ("first", "second"), (1, 2), strict=True):
        assert parts[0]["type"] == "start" and parts[0]["messageMetadata"]["runId"].endswith(f"-turn-{turn}")
        said = "".join(p["delta"] for p in parts if p["type"] == "text-delta")
        assert said == f"done: {text}"
        assert parts[-1]["type"] == "finish"
    session_id = replies[1][0]["messageMetadata"]["sessionId"]
    assert [r.status for r in settled(executor, session_id, 2)] == ["completed", "completed"]


async def test_ai_sdk_route_refuses_an_unknown_policy(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/chat/ui", json=ui_post("hi", "u1"), headers={"X-Helix-Double-Text": "later"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


def test_python_client_enqueues_over_a_real_port(executor: DBOSAgentExecutor) -> None:
    app = create_app(executor, bearer_tokens=[TOKEN])
    with serve(app) as url, HelixClient(url, token=TOKEN) as http:
        http.start("worker", "first", session_id="dt-client")
        time.sleep(0.01)
        queued = http.start("worker", "second", session_id="dt-client", double_text="enqueue")
        assert queued.double_text is not None
        assert (queued.double_text["status"], queued.double_text["run_id"]) == ("queued", "dt-client-turn-2")
        assert [r.status for r in settled(executor, "dt-client", 2)] == ["completed", "completed"]


def test_only_a_listening_agents_runs_record_steering_steps(executor: DBOSAgentExecutor) -> None:
    """A run of an agent without ``double_text="steer"`` records what it recorded before steering existed."""
    for agent, session_id in (("worker", "dt-steps-deaf"), ("steerable", "dt-steps-listening")):
        executor.execute(agent, "first", session_id=session_id).result(timeout_seconds=60)
    deaf = [s["function_name"] for s in DBOS.list_workflow_steps("dt-steps-deaf-turn-1")]
    listening = [s["function_name"] for s in DBOS.list_workflow_steps("dt-steps-listening-turn-1")]
    assert not [name for name in deaf if name.startswith("DBOS.")]
    # The listening run: the same steps, plus the patch once and a non-blocking recv (and its
    # timeout) before each of its two model calls.
    assert [name.replace("steerable", "worker") for name in listening if not name.startswith("DBOS.")] == deaf
    assert [name for name in listening if name.startswith("DBOS.")] == [
        "DBOS.patch-helix-steer",
        "DBOS.recv",
        "DBOS.sleep",
        "DBOS.recv",
        "DBOS.sleep",
    ]
