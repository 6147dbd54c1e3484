"""SSE over a real port (uvicorn in a thread) with a real streaming client: reconnection is the point."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from helix_dbos.runtime.aio import background_loop
from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import chunk_to_json
from helix_dbos.stream.events import (
    SSEMessage,
    StreamEndEvent,
    StreamStatusEvent,
    parse_stream_event,
    to_sse_message,
)
from tests.service.conftest import AUTH, Service

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["memory", "sql"])
def stream_backend(request: pytest.FixtureRequest) -> str:
    """Every SSE test runs on the in-memory and on the durable SQL stream manager."""
    value: str = request.param
    return value


@dataclass
class Event:
    event: str
    data: str
    id: str | None = None

    @property
    def chunk(self) -> dict[str, Any]:
        assert self.event == "chunk"
        value: dict[str, Any] = json.loads(self.data)
        return value


async def read_events(response: httpx.Response) -> AsyncIterator[Event]:
    """Parse ``text/event-stream``: ``id:``/``event:``/``data:`` fields, comments, blank-line dispatch."""
    fields: dict[str, list[str]] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                yield Event(
                    event=(fields.get("event") or ["message"])[-1],
                    data="\n".join(fields["data"]),
                    id=fields["id"][-1] if "id" in fields else None,
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue  # a keep-alive ping
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))


def is_client_call(event: Event) -> bool:
    return event.event == "chunk" and event.chunk["type"] == "tool_start" and event.chunk["tool_name"] == "get_location"


async def stored_records(service: Service, stream_id: str) -> list[ChunkRecord]:
    manager = service.executor.streams.manager
    future = asyncio.run_coroutine_threadsafe(manager.read_records(stream_id), background_loop.loop)
    records: list[ChunkRecord] = await asyncio.wrap_future(future)
    return records


def live_client(live_url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=live_url, headers=AUTH, timeout=httpx.Timeout(10.0))


async def answer(http: httpx.AsyncClient, session_id: str, event: Event, city: str) -> None:
    submission = {"kind": "client-tool-result", "tool_call_id": event.chunk["tool_call_id"], "result": {"city": city}}
    response = await http.post(f"/v1/chat/{session_id}/tool-results", json=submission)
    assert response.status_code == 202, response.text


async def test_client_tool_round_trip_over_sse(service: Service, live_url: str) -> None:
    async with asyncio.timeout(30), live_client(live_url) as http:
        started = (await http.post("/v1/chat", json={"agent": "locator", "message": "where am I?"})).json()
        session_id = started["session_id"]
        events: list[Event] = []
        async with http.stream("GET", started["stream_url"]) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in read_events(response):
                events.append(event)
                if is_client_call(event):
                    # The browser runs the tool, then answers over plain HTTP while the stream stays open.
                    await answer(http, session_id, event, "Lyon")
                if event.event in ("end", "fail", "truncated"):
                    break
        assert events[-1] == Event(event="end", data='{"type":"end"}')
        # What the service writes is what the toolkit's parser reads, event by event, byte for byte.
        parsed = [parse_stream_event(e.data, event=e.event, id=e.id) for e in events]
        assert [to_sse_message(p) for p in parsed] == [SSEMessage(e.event, e.data, e.id) for e in events]
        assert isinstance(parsed[-1], StreamEndEvent)
        assert any(isinstance(p, StreamStatusEvent) and p.status == "paused" for p in parsed)
        chunks = [e.chunk for e in events if e.event == "chunk"]
        types = [c["type"] for c in chunks]
        assert types.index("tool_start") < types.index("output")
        assert [c["tool_name"] for c in chunks if c["type"] == "tool_end"] == ["note", "get_location"]
        assert chunks[-1] == chunks[-1] | {"type": "output", "output": "You are in Lyon."}
        text = "".join(c["content"] for c in chunks if c["type"] == "text_delta")
        assert text.endswith("You are in Lyon.")
        result = (await http.get(f"/v1/sessions/{session_id}/result?timeout_seconds=5")).json()
        assert result["status"] == "completed"
        snapshot = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert snapshot["stream"]["status"] == "ended"
        assert snapshot["stream"]["latest_sequence"] == int(next(e.id for e in reversed(events) if e.id))


async def test_reconnecting_with_last_event_id_delivers_every_chunk_exactly_once(
    service: Service, live_url: str
) -> None:
    async with asyncio.timeout(30), live_client(live_url) as http:
        session_id = (await http.post("/v1/runs", json={"agent": "locator", "input": "where am I?"})).json()[
            "session_id"
        ]
        url = f"/v1/sessions/{session_id}/stream"
        received: list[Event] = []
        statuses: list[str] = []
        answered = False

        async def take(event: Event) -> None:
            nonlocal answered
            if event.event == "chunk":
                received.append(event)
                if is_client_call(event) and not answered:
                    answered = True
                    await answer(http, session_id, event, "Oslo")

        # First connection: read two chunks, then drop the connection mid-stream.
        async with http.stream("GET", url) as response:
            async for event in read_events(response):
                await take(event)
                if len(received) == 2:
                    break
        # Reconnect, as EventSource does, with the id of the last event seen; once more mid-way.
        for connection in (1, 2):
            headers = {"Last-Event-ID": str(received[-1].id)}
            async with http.stream("GET", url + "?after=0", headers=headers) as response:
                assert response.status_code == 200
                seen_here = 0
                async for event in read_events(response):
                    await take(event)
                    seen_here += event.event == "chunk"
                    if event.event == "status":
                        statuses.append(json.loads(event.data)["status"])
                    elif event.event != "chunk":
                        assert event.event == "end", event
                        break
                    if connection == 1 and seen_here == 3:
                        break
        assert answered
        assert statuses[0] == "paused"  # the run_paused chunk (waiting for the client) is also a status event
        stored = await stored_records(service, session_id)
        assert [(int(str(e.id)), e.data) for e in received] == [(r.sequence, chunk_to_json(r.chunk)) for r in stored]

        # Reconnecting after the end replays nothing and ends at once; ?after= alone resumes too.
        async with http.stream("GET", url, headers={"Last-Event-ID": str(received[-1].id)}) as response:
            assert [e async for e in read_events(response)] == [Event(event="end", data='{"type":"end"}')]
        async with http.stream("GET", url, params={"after": received[-3].id}) as response:
            tail = [e async for e in read_events(response)]
        assert [e.id for e in tail] == [e.id for e in received[-2:]] + [None]
        async with http.stream("GET", url, headers={"Last-Event-ID": "not-a-number"}) as response:
            await response.aread()
            assert response.status_code == 422
            assert response.json()["error"]["code"] == "validation_error"


async def test_abort_ends_the_stream_with_a_fail_event(service: Service, live_url: str) -> None:
    async with asyncio.timeout(30), live_client(live_url) as http:
        session_id = (await http.post("/v1/runs", json={"agent": "locator", "input": "go"})).json()["session_id"]
        events: list[Event] = []
        async with http.stream("GET", f"/v1/sessions/{session_id}/stream") as response:
            async for event in read_events(response):
                events.append(event)
                if is_client_call(event):
                    assert (
                        await http.post(f"/v1/sessions/{session_id}/abort", json={"reason": "stop"})
                    ).status_code == 200
                if event.event in ("end", "fail", "truncated"):
                    break
        fail = events[-1]
        assert fail.event == "fail" and fail.id is None
        assert json.loads(fail.data) == {"type": "fail", "error": "aborted: stop", "code": "transport_error"}


async def test_stream_requires_auth_and_a_known_session(live_url: str) -> None:
    async with httpx.AsyncClient(base_url=live_url, timeout=5) as http:
        response = await http.get("/v1/sessions/anything/stream")
        assert response.status_code == 401
        response = await http.get("/v1/chat/no-such-session/stream", headers=AUTH)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "state_session_not_found"
