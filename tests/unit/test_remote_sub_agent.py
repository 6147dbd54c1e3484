"""The pure parts of remote sub-agents and of the client: ids, definitions, SSE parsing, error mapping."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from helix_dbos.client import HttpRemoteAgentTransport, SessionStatusView
from helix_dbos.client.http import service_error
from helix_dbos.client.transport import _state
from helix_dbos.errors import (
    RemoteSubAgentClientToolUnsupportedError,
    ServiceConflictError,
    ServiceNotFoundError,
    ServiceRequestError,
    ServiceUnauthorizedError,
    ServiceUnavailableError,
    SubAgentDefinitionError,
)
from helix_dbos.orchestration.tool_batch import split_tool_batch
from helix_dbos.remote_sub_agent import (
    RemoteRunStatus,
    RemoteStreamEvent,
    create_remote_sub_agent_tool,
    is_remote_sub_agent_tool,
    remote_session_id_for,
)
from helix_dbos.runtime.ids import child_session_id_for
from helix_dbos.step_result import ParsedToolCall


class TopicIn(BaseModel):
    topic: str


class FakeTransport:
    """Only for definition-time checks: nothing is called."""

    def describe(self) -> str:
        return "http://remote"

    def start(self, agent: str, message: str, session_id: str) -> str:
        raise AssertionError

    def stream(self, session_id: str, *, after_sequence: int) -> Iterator[RemoteStreamEvent]:
        raise AssertionError

    def get_status(self, session_id: str) -> RemoteRunStatus:
        raise AssertionError

    def interrupt(self, session_id: str, reason: str) -> None:
        raise AssertionError

    def abort(self, session_id: str, reason: str) -> None:
        raise AssertionError


def test_remote_session_ids_are_deterministic_and_valid_on_the_service() -> None:
    assert remote_session_id_for("session-1", "delegate-1") == child_session_id_for("session-1", "delegate-1")
    assert remote_session_id_for("session-1", "call_abc") == "session-1-sub-call_abc"
    odd_id = remote_session_id_for("session-1", "call/1 x")  # '/' and ' ' are not allowed in a service session id
    assert odd_id == remote_session_id_for("session-1", "call/1 x")
    assert odd_id.startswith("remote-sub-") and "/" not in odd_id
    assert remote_session_id_for("session-1", "call/2 x") != odd_id
    assert remote_session_id_for("session-2", "call/1 x") != odd_id
    assert len(remote_session_id_for("s" * 190, "delegate-1")) <= 200


def test_the_tool_is_named_like_a_sub_agent_and_keeps_its_transport() -> None:
    transport = FakeTransport()
    tool = create_remote_sub_agent_tool(
        "researcher", description="Research", input_schema=TopicIn, transport=transport, timeout_ms=5000
    )
    assert (tool.name, tool.remote_agent, tool.transport, tool.timeout_ms) == (
        "subagent__researcher",
        "researcher",
        transport,
        5000,
    )
    assert is_remote_sub_agent_tool(tool) and tool.execute is None and not tool.is_client
    other = create_remote_sub_agent_tool(
        "r", description="d", input_schema=TopicIn, transport=transport, remote_agent="researcher-v2"
    )
    assert other.remote_agent == "researcher-v2"


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"name": "bad name"}, "not a valid tool name"),
        ({"input_schema": dict}, "input_schema"),
        ({"transport": object()}, "RemoteAgentTransport"),
        ({"timeout_ms": 0}, "timeout_ms"),
    ],
)
def test_definition_errors(kwargs: dict[str, Any], problem: str) -> None:
    args: dict[str, Any] = {"name": "r", "description": "d", "input_schema": TopicIn, "transport": FakeTransport()}
    args.update(kwargs)
    name = args.pop("name")
    with pytest.raises(SubAgentDefinitionError, match=problem):
        create_remote_sub_agent_tool(name, **args)


def test_a_remote_call_goes_to_the_remote_phase() -> None:
    tool = create_remote_sub_agent_tool("r", description="d", input_schema=TopicIn, transport=FakeTransport())
    call = ParsedToolCall(id="c1", name="subagent__r", arguments={"topic": "x"})
    batch = split_tool_batch([call], {tool.name: tool}, requires_approval=lambda c, t: False)
    assert batch.remote_sub_agents == [(call, tool)]
    assert not (batch.regular or batch.sub_agents or batch.hitl or batch.rejected)


def test_sse_parsing_reads_ids_events_and_multi_line_data() -> None:
    body = (
        ": ping\r\n\r\n"
        'id: 7\r\nevent: chunk\r\ndata: {"type":\r\ndata: "text_delta"}\r\n\r\n'
        'event: end\r\ndata: {"type": "end"}\r\n\r\n'
    )
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body.encode()))
    from helix_dbos.client import HelixClient

    with HelixClient("http://service", transport=transport) as client:
        events = list(client.stream("s"))
    assert [(e.event, e.id, e.data) for e in events] == [
        ("chunk", 7, {"type": "text_delta"}),
        ("end", None, {"type": "end"}),
    ]


@pytest.mark.parametrize(
    ("status", "code", "cls", "retryable"),
    [
        (401, "unauthenticated", ServiceUnauthorizedError, False),
        (404, "state_session_not_found", ServiceNotFoundError, False),
        (409, "state_already_running", ServiceConflictError, False),
        (422, "validation_error", ServiceRequestError, False),
        (413, "validation_body_too_large", ServiceRequestError, False),
        (408, "transport_result_timeout", ServiceUnavailableError, True),
        (503, "transport_error", ServiceUnavailableError, True),
        (500, "framework_internal_error", ServiceUnavailableError, True),
    ],
)
def test_error_answers_map_by_status(status: int, code: str, cls: type[Exception], retryable: bool) -> None:
    request = httpx.Request("GET", "http://service/v1/sessions/s")
    response = httpx.Response(status, json={"error": {"code": code, "message": "m"}}, request=request)
    error = service_error(response)
    assert type(error) is cls
    assert (error.status, error.service_code, error.retryable) == (status, code, retryable)
    assert error.code == (
        code
        if code not in ("unauthenticated", "validation_body_too_large", "transport_result_timeout")
        else "transport_error"
    )


def test_a_non_json_error_answer_still_maps() -> None:
    request = httpx.Request("GET", "http://service/x")
    error = service_error(httpx.Response(502, text="Bad Gateway", request=request))
    assert isinstance(error, ServiceUnavailableError) and error.service_code == "http_502"


@pytest.mark.parametrize(
    ("session", "run", "pending", "state"),
    [
        ("active", "running", [], "running"),
        ("active", "suspended", [], "suspended"),
        ("active", "running", [{"kind": "client"}], "suspended"),
        ("completed", "completed", [], "completed"),
        ("failed", "failed", [], "failed"),
        ("interrupted", "interrupted", [], "interrupted"),
    ],
)
def test_the_http_transport_reads_the_run_state_from_the_snapshot(
    session: str, run: str, pending: list[dict[str, Any]], state: str
) -> None:
    view = SessionStatusView(
        session_id="s", agent="a", status=session, current_run={"status": run}, pending_tool_calls=pending
    )
    assert _state(view) == state


def test_the_http_transport_describes_its_service() -> None:
    transport = HttpRemoteAgentTransport("http://remote:8000/", token="t")
    assert transport.describe() == "http://remote:8000"
    transport.close()


def test_the_client_tool_error_carries_the_seeds_failure_reason() -> None:
    error = RemoteSubAgentClientToolUnsupportedError("asker", "s-sub-1")
    assert error.failure_reason == "client-tool-unsupported"
    assert (error.code, error.retryable, error.remote_session_id) == ("framework_not_supported", False, "s-sub-1")
