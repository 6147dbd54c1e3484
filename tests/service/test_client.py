"""``helix_dbos.client.HelixClient`` against a live service (uvicorn on a real port, durable SQL streams).

The stream's resume is tested with a real connection cut mid-body (a transport that ends the first
stream response with a read error half-way): the client must reconnect with ``Last-Event-ID`` and
yield every chunk exactly once. Error answers map to the ``ServiceResponseError`` subclasses.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from helix_dbos.client import HelixClient
from helix_dbos.errors import (
    ServiceConflictError,
    ServiceNotFoundError,
    ServiceRequestError,
    ServiceUnauthorizedError,
    ServiceUnavailableError,
)
from tests.service.conftest import TOKEN, Service, free_port

pytestmark = pytest.mark.postgres


@pytest.fixture
def stream_backend() -> str:
    return "sql"


class _CutStream(httpx.SyncByteStream):
    """A response body that breaks (``ReadError``) after ``limit`` bytes, as a dropped connection does."""

    def __init__(self, inner: httpx.SyncByteStream, limit: int) -> None:
        self.inner, self.limit = inner, limit

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for part in self.inner:
            if sent + len(part) >= self.limit:
                yield part[: self.limit - sent]
                raise httpx.ReadError("connection cut by the test")
            sent += len(part)
            yield part

    def close(self) -> None:
        self.inner.close()


class CutFirstStream(httpx.BaseTransport):
    """Cuts the first stream response after ``limit`` bytes; records every request's ``Last-Event-ID``."""

    def __init__(self, limit: int) -> None:
        self.inner = httpx.HTTPTransport()
        self.limit = limit
        self.last_event_ids: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if not request.url.path.endswith("/stream"):
            return response
        self.last_event_ids.append(request.headers.get("Last-Event-ID"))
        if len(self.last_event_ids) > 1:
            return response
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(
            response.status_code, headers=response.headers, stream=_CutStream(response.stream, self.limit)
        )

    def close(self) -> None:
        self.inner.close()


def test_a_dropped_stream_resumes_with_last_event_id(service: Service, live_url: str) -> None:
    with HelixClient(live_url, token=TOKEN) as client:
        started = client.start("echo", "hello there")
        assert client.result(started.session_id, timeout_seconds=15).output == "echo: hello there"
        reference = list(client.stream(started.session_id))
        raw = httpx.get(
            f"{live_url}/v1/sessions/{started.session_id}/stream", headers={"Authorization": f"Bearer {TOKEN}"}
        ).content
    ids = [e.id for e in reference if e.event == "chunk"]
    assert len(ids) >= 3 and reference[-1].event == "end"

    cut = CutFirstStream(limit=len(raw) // 2)
    with HelixClient(live_url, token=TOKEN, transport=cut, reconnect_delay_seconds=0.01) as client:
        events = list(client.stream(started.session_id))
    assert [e.id for e in events if e.event == "chunk"] == ids  # every chunk, once, in order
    assert [e.data for e in events] == [e.data for e in reference]
    assert len(cut.last_event_ids) == 2 and cut.last_event_ids[0] is None
    resumed_after = int(cut.last_event_ids[1] or 0)
    assert ids[0] <= resumed_after < ids[-1]  # cut mid-stream: resumed after the last whole event


def test_after_starts_the_stream_after_a_sequence(service: Service, live_url: str) -> None:
    with HelixClient(live_url, token=TOKEN) as client:
        started = client.start("echo", "again")
        client.result(started.session_id, timeout_seconds=15)
        ids = [e.id for e in client.stream(started.session_id) if e.id is not None]
        later = [e.id for e in client.stream(started.session_id, after=ids[1]) if e.id is not None]
    assert later == ids[2:]


def test_start_submit_status_interrupt_abort(service: Service, live_url: str) -> None:
    with HelixClient(live_url, token=TOKEN) as client:
        started = client.start("locator", "where am I?", idempotency_key="client-test-1")
        assert client.start("locator", "where am I?", idempotency_key="client-test-1").run_id == started.run_id
        status = _wait(client, started.session_id, lambda s: s.awaiting_client_tool)
        call: dict[str, Any] = status.pending_tool_calls[0]
        assert call["kind"] == "client"
        answer = {"kind": "client-tool-result", "tool_call_id": call["tool_call_id"], "result": {"city": "Lyon"}}
        client.submit_tool_result(started.session_id, answer)
        with pytest.raises(ServiceConflictError) as again:
            client.submit_tool_result(started.session_id, answer)  # a tool call takes one submission
        assert again.value.status == 409
        assert client.result(started.session_id, timeout_seconds=15).output == "You are in Lyon."
        assert client.status(started.session_id).awaiting_client_tool is False

        second = client.start("locator", "go")
        _wait(client, second.session_id, lambda s: s.awaiting_client_tool)
        assert client.interrupt(second.session_id, "user") is True
        assert client.result(second.session_id, timeout_seconds=15).status == "interrupted"

        third = client.start("locator", "go")
        _wait(client, third.session_id, lambda s: s.awaiting_client_tool)
        client.abort(third.session_id, "enough")
        result = client.result(third.session_id, timeout_seconds=15)
        assert (result.status, result.aborted) == ("failed", True)
        assert [e.event for e in client.stream(third.session_id)][-1] == "fail"


def test_error_answers_map_to_exceptions(service: Service, live_url: str) -> None:
    with HelixClient(live_url, token="wrong-token") as bad, pytest.raises(ServiceUnauthorizedError) as unauthorized:
        bad.status("anything")
    assert (unauthorized.value.status, unauthorized.value.service_code) == (401, "unauthenticated")
    with HelixClient(live_url, token=TOKEN) as client:
        with pytest.raises(ServiceNotFoundError) as missing:
            client.status("no-such-session")
        assert (missing.value.code, missing.value.retryable) == ("state_session_not_found", False)
        with pytest.raises(ServiceNotFoundError) as agent:
            client.start("no-such-agent", "hi")
        assert agent.value.service_code == "state_agent_not_found"
        with pytest.raises(ServiceNotFoundError):
            next(iter(client.stream("no-such-session")))
        with pytest.raises(ServiceRequestError) as invalid:
            client.start("echo", "hi", session_id="not a valid id!")
        assert (invalid.value.status, invalid.value.code) == (422, "validation_error")
    with HelixClient(f"http://127.0.0.1:{free_port()}", token=TOKEN) as nowhere:
        with pytest.raises(ServiceUnavailableError) as away:
            nowhere.status("s")
        assert (away.value.status, away.value.retryable) == (0, True)
        began = time.monotonic()
        with pytest.raises(ServiceUnavailableError):
            list(nowhere.stream("s", reconnect_timeout_seconds=0.5))
        assert time.monotonic() - began < 5


def _wait(client: HelixClient, session_id: str, until: Any, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status = client.status(session_id)
        if until(status):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
