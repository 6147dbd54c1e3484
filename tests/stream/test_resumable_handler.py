"""The resumable SSE handler in a plain Starlette app: real port, real HTTP client, real PostgreSQL.

The app is not helix-dbos's service: it is what a user builds around their own stream manager,
so these tests show the toolkit stands on its own. Reconnection is the point, hence uvicorn on a
port (``tests/service/conftest.serve``) and a streaming httpx client that drops its connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from helix_dbos.stream.base import StreamManager
from helix_dbos.stream.chunks import TextDeltaChunk
from helix_dbos.stream.events import (
    SSEMessage,
    StreamChunkEvent,
    StreamEndEvent,
    StreamEvent,
    StreamTruncatedEvent,
    parse_stream_event,
)
from helix_dbos.stream.projection import StreamProjector
from helix_dbos.stream.resumable import create_resumable_stream_handler, records_from_manager, stream_events
from helix_dbos.stream.sql import SqlStreamManager
from helix_dbos.stream.state_streamer import create_state_streamer
from tests.service.conftest import serve
from tests.stream.conftest import empty_database
from tests.stream.helpers import text

TIMEOUT = httpx.Timeout(10.0)


async def sse_messages(response: httpx.Response) -> AsyncIterator[SSEMessage]:
    """``text/event-stream`` into messages: ``id``/``event``/``data`` fields, comments skipped."""
    fields: dict[str, list[str]] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                yield SSEMessage(
                    event=(fields.get("event") or ["message"])[-1],
                    data="\n".join(fields["data"]),
                    id=fields["id"][-1] if "id" in fields else None,
                )
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))


async def events(response: httpx.Response) -> AsyncIterator[StreamEvent]:
    async for message in sse_messages(response):
        yield parse_stream_event(message.data, event=message.event, id=message.id)


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    return empty_database("postgres", request)


@pytest.fixture
def live(pg_url: str) -> Iterator[str]:
    """A Starlette app serving ``/streams/{id}`` from its own SqlStreamManager (a process of its own)."""
    server_manager = SqlStreamManager(pg_url)
    handler = create_resumable_stream_handler(stream_manager=server_manager, ping_seconds=1.0)

    async def stream(request: Request) -> Response:
        return await handler.handle_request(request, request.path_params["stream_id"])

    app = Starlette(routes=[Route("/streams/{stream_id}", stream)])
    with serve(app) as url:  # type: ignore[arg-type]
        yield url
    server_manager.close()


@pytest.fixture
def writer_manager(pg_url: str) -> Iterator[SqlStreamManager]:
    manager = SqlStreamManager(pg_url)
    yield manager
    manager.close()


@pytest.mark.postgres
async def test_a_dropped_connection_resumes_with_last_event_id_exactly_once(
    live: str, writer_manager: SqlStreamManager
) -> None:
    writer = await writer_manager.create_writer("job", "run-1", "writer")
    state = create_state_streamer(stream_manager=writer_manager, stream_id="job", agent_type="writer")
    await state.emit_snapshot({"done": 0, "lines": []})
    await writer.write(text("a"))
    await writer.write(text("b"))

    seen: list[StreamEvent] = []
    async with httpx.AsyncClient(base_url=live, timeout=TIMEOUT) as http:
        async with http.stream("GET", "/streams/job") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in events(response):
                seen.append(event)
                if len(seen) == 3:
                    break  # the connection drops here, mid-stream
        last_id = seen[-1].sequence if isinstance(seen[-1], StreamChunkEvent) else None
        assert last_id is not None

        # The run goes on while the client is away.
        await state.update({"done": 1, "lines": ["c"]})
        await writer.write(text("c"))
        await writer.write(text("d"))
        await writer_manager.end_stream("job")

        async with http.stream("GET", "/streams/job", headers={"Last-Event-ID": str(last_id)}) as response:
            assert response.status_code == 200
            seen.extend([event async for event in events(response)])

    assert isinstance(seen[-1], StreamEndEvent)
    chunks = [e for e in seen if isinstance(e, StreamChunkEvent)]
    sequences = [e.sequence for e in chunks]
    assert sequences == sorted(set(sequences)), sequences  # every chunk once, in order
    assert "".join(e.chunk.content for e in chunks if isinstance(e.chunk, TextDeltaChunk)) == "abcd"
    projector: StreamProjector[object] = StreamProjector()
    for event in seen:
        projector.apply(event)
    assert projector.state == state.state == {"done": 1, "lines": ["c"]}
    await writer.close()
    await state.close()


@pytest.mark.postgres
async def test_after_query_unknown_stream_and_a_bad_position(live: str, writer_manager: SqlStreamManager) -> None:
    writer = await writer_manager.create_writer("s2", "run-1", "writer")
    for content in "xyz":
        await writer.write(text(content))
    await writer_manager.end_stream("s2")
    async with httpx.AsyncClient(base_url=live, timeout=TIMEOUT) as http:
        async with http.stream("GET", "/streams/s2?after=1", headers={"Last-Event-ID": "2"}) as response:
            got = [event async for event in events(response)]
        assert [e.chunk.content for e in got if isinstance(e, StreamChunkEvent)] == ["z"]  # type: ignore[union-attr]
        assert isinstance(got[-1], StreamEndEvent)
        async with http.stream("GET", "/streams/s2?after=1") as response:
            got = [event async for event in events(response)]
        assert [e.sequence for e in got if isinstance(e, StreamChunkEvent)] == [2, 3]

        missing = await http.get("/streams/nope")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "state_session_not_found"
        bad = await http.get("/streams/s2", headers={"Last-Event-ID": "12x"})
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == "validation_error"


async def test_a_truncation_under_an_attached_reader_is_a_truncated_event(stream_manager: StreamManager) -> None:
    """On every manager: the wire event carries the step, the reader's position and ``atSequence``."""
    writer = await stream_manager.create_writer("t", "run-1", "writer")
    for step in (1, 1, 2, 2):
        await writer.write(text(f"s{step}", step=step))
    await writer.close()
    info = await stream_manager.get_stream_info("t")
    assert info is not None
    records = await records_from_manager(stream_manager, "t", 1)
    assert records is not None
    await stream_manager.cleanup_to_step("t", 1)  # removes the step-2 chunks the reader had not read
    got = [event async for event in stream_events(records)]
    truncated = got[-1]
    assert isinstance(truncated, StreamTruncatedEvent), got
    assert truncated.truncated_at_step == 1
    assert truncated.last_valid_sequence == 1
    assert truncated.at_sequence == info.latest_sequence
