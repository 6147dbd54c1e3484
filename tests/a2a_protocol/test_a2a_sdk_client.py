"""The official ``a2a-sdk`` client against a live ``helix-dbos serve --a2a``: card, send, stream, cancel, HITL.

Each test talks to the real process over HTTP with the SDK's own client (``create_client``: card
resolution, JSON-RPC transport, SSE), then checks what helix recorded through the service's own
routes: the task is the run, its context the session.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import A2ACardResolver
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError
from google.protobuf.json_format import MessageToDict

from tests.a2a_protocol.agents import TOKEN
from tests.a2a_protocol.conftest import A2AService

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def user_message(text: str, *, context_id: str = "") -> Message:
    return Message(message_id=str(uuid.uuid4()), context_id=context_id, role=Role.ROLE_USER, parts=[Part(text=text)])


async def send(
    url: str, message: Message, *, streaming: bool, return_immediately: bool = False
) -> list[StreamResponse]:
    """Every event the SDK client yields for one message."""
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as http:
        client = await create_client(url, ClientConfig(httpx_client=http, streaming=streaming))
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=return_immediately)
        )
        return [event async for event in client.send_message(request)]


async def call(url: str, method: str, request: Any) -> Task:
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as http:
        client = await create_client(url, ClientConfig(httpx_client=http, streaming=False))
        result: Task = await getattr(client, method)(request)
        return result


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_agent_card_is_served_behind_the_token(a2a: A2AService) -> None:
    async def resolve(headers: dict[str, str]) -> Any:
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            return await A2ACardResolver(http, a2a.url("writer")).get_agent_card()

    card = asyncio.run(resolve(AUTH))
    assert card.name == "writer" and card.description == "Writes a line about anything."
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    [interface] = card.supported_interfaces
    assert (interface.url, interface.protocol_binding, interface.protocol_version) == (
        a2a.url("writer"),
        "JSONRPC",
        "1.0",
    )
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"
    assert [s.id for s in card.skills] == ["writer"]
    unauthenticated = httpx.get(a2a.url("writer") + "/.well-known/agent-card.json")
    assert unauthenticated.status_code == 401  # fail-closed, like every route


def test_send_answers_with_the_completed_task_of_the_run(a2a: A2AService) -> None:
    message = user_message("hello")
    [event] = asyncio.run(send(a2a.url("writer"), message, streaming=False))
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, MessageToDict(task)
    [artifact] = task.artifacts
    assert (artifact.artifact_id, artifact.parts[0].text) == ("output", "Wrote: hello")
    # contextId -> session, taskId -> run: helix's own records say the same
    session = a2a.serve.http.get(f"/v1/sessions/{task.context_id}").json()
    assert (session["agent"], session["status"], session["output"]) == ("writer", "completed", "Wrote: hello")
    assert session["current_run"]["run_id"] == task.id
    # the same message again (a client retrying) finds the same run: the message id is the key
    [again] = asyncio.run(send(a2a.url("writer"), message, streaming=False))
    assert (again.task.id, again.task.context_id) == (task.id, task.context_id)
    assert len(a2a.serve.http.get(f"/v1/sessions/{task.context_id}/runs").json()) == 1
    # a new message on the context is the session's next turn: a new task in the same context
    [turn2] = asyncio.run(send(a2a.url("writer"), user_message("again", context_id=task.context_id), streaming=False))
    assert turn2.task.context_id == task.context_id and turn2.task.id != task.id
    assert turn2.task.artifacts[0].parts[0].text == "Wrote: again"
    fetched = asyncio.run(call(a2a.url("writer"), "get_task", GetTaskRequest(id=task.id)))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED and fetched.context_id == task.context_id


def test_stream_sends_the_task_its_text_and_the_final_status(a2a: A2AService) -> None:
    events = asyncio.run(send(a2a.url("writer"), user_message("streamed"), streaming=True))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and kinds[-1] == "status_update", kinds
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    texts = [e.artifact_update for e in events if e.HasField("artifact_update")]
    deltas = "".join(u.artifact.parts[0].text for u in texts if u.artifact.artifact_id == "text")
    assert deltas == "Wrote: streamed"  # the run's durable stream, as it was written
    [output] = [u for u in texts if u.artifact.artifact_id == "output"]
    assert output.last_chunk and output.artifact.parts[0].text == "Wrote: streamed"
    assert {e.status_update.task_id for e in events if e.HasField("status_update")} == {events[0].task.id}
    # the next turn's stream starts at its own run: only its text
    context_id = events[0].task.context_id
    turn2 = asyncio.run(send(a2a.url("writer"), user_message("second", context_id=context_id), streaming=True))
    deltas2 = [
        e.artifact_update.artifact.parts[0].text for e in turn2 if e.artifact_update.artifact.artifact_id == "text"
    ]
    assert "".join(deltas2) == "Wrote: second" and turn2[0].task.id != events[0].task.id


def test_cancel_aborts_a_long_run(a2a: A2AService) -> None:
    [event] = asyncio.run(send(a2a.url("digger"), user_message("dig"), streaming=False, return_immediately=True))
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_WORKING
    wait_for(a2a.dig_entries, "the tool to start")
    canceled = asyncio.run(call(a2a.url("digger"), "cancel_task", CancelTaskRequest(id=task.id)))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    session = a2a.serve.http.get(f"/v1/sessions/{task.context_id}").json()
    assert session["aborted"] is True and session["status"] == "failed"
    fetched = asyncio.run(call(a2a.url("digger"), "get_task", GetTaskRequest(id=task.id)))
    assert fetched.status.state == TaskState.TASK_STATE_CANCELED
    # an ended task is not cancelable: a JSON-RPC error, not a second abort
    with pytest.raises(TaskNotCancelableError, match="already ended"):
        asyncio.run(call(a2a.url("digger"), "cancel_task", CancelTaskRequest(id=task.id)))


def test_a_run_waiting_for_an_approval_is_input_required(a2a: A2AService) -> None:
    events = asyncio.run(send(a2a.url("approver"), user_message("publish"), streaming=True))
    final = events[-1].status_update
    assert final.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, [MessageToDict(e) for e in events]
    text, data = final.status.message.parts
    assert "publish" in text.text
    [pending] = MessageToDict(data.data)["pendingToolCalls"]
    assert (pending["toolName"], pending["kind"]) == ("publish", "approval")
    # answered through helix's own route, the run goes on and the task completes
    task_id, session_id = final.task_id, final.context_id
    answer = {"kind": "approval-response", "tool_call_id": pending["toolCallId"], "approved": True}
    assert a2a.serve.http.post(f"/v1/sessions/{session_id}/tool-results", json=answer).status_code == 202

    def completed() -> bool:
        task = asyncio.run(call(a2a.url("approver"), "get_task", GetTaskRequest(id=task_id)))
        return task.status.state == TaskState.TASK_STATE_COMPLETED

    wait_for(completed, "the approved run to complete")
