"""A workflow thread ends its run's stream itself, without the hop to the event loop, in order.

``RunStreams.end`` / ``fail`` used to go through the runtime's background loop, which handed the
SQL manager's one statement on to a worker thread: two thread hand-offs for the run's last stream
write. The SQL manager now ends a stream from the calling thread (``ThreadEndingStream``); the end
must still land after every chunk written before it, including a write still travelling through the
loop, in which case the end follows it there.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from helix_dbos.errors import HelixError
from helix_dbos.logger import std_logger
from helix_dbos.runtime import streaming
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.streaming import RunStreams
from helix_dbos.stream.chunks import StreamChunk, TextDeltaChunk
from helix_dbos.stream.sql import SqlStreamManager
from tests.stream.helpers import contents, next_chunk, text


def _stored(streams: RunStreams, stream_id: str) -> list[StreamChunk]:
    return [record.chunk for record in streams.stored_records(stream_id)]


def _status(manager: SqlStreamManager, stream_id: str) -> str | None:
    info = background_loop.run(manager.get_stream_info(stream_id))
    return None if info is None else info.status


def test_the_end_is_stored_from_the_workflow_thread_without_the_loop(
    manager: SqlStreamManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    streams = RunStreams(manager, std_logger())
    streams.open("s-direct", "s1", "writer")
    for i in range(3):
        streams.write("s-direct", text(f"c{i}"), dedupe_key=f"s1:{i}")  # queued from this thread

    def no_loop(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the end went through the event loop")

    monkeypatch.setattr(streaming.background_loop, "run", no_loop)
    streams.end("s-direct")
    monkeypatch.undo()

    assert _status(manager, "s-direct") == "ended"
    assert contents(_stored(streams, "s-direct")) == ["c0", "c1", "c2"]  # stored before the end


def test_a_failed_stream_keeps_its_error(manager: SqlStreamManager) -> None:
    streams = RunStreams(manager, std_logger())
    streams.open("s-failed", "s1", "writer")
    streams.write("s-failed", text("partial"), dedupe_key="s1:0")
    streams.fail("s-failed", "model exploded")

    assert _status(manager, "s-failed") == "failed"

    async def read_to_the_failure() -> list[StreamChunk]:
        reader = await manager.create_reader("s-failed")
        assert reader is not None
        seen = [await next_chunk(reader)]
        with pytest.raises(HelixError) as caught:
            await next_chunk(reader)
        assert caught.value.message == "model exploded"  # the error a reader of the run is told
        return seen

    assert contents(background_loop.run(read_to_the_failure())) == ["partial"]


def test_an_end_behind_a_write_still_on_the_loop_follows_it_there(manager: SqlStreamManager) -> None:
    streams = RunStreams(manager, std_logger())
    streams.open("s-behind", "s1", "writer")
    gate = threading.Event()
    background_loop.loop.call_soon_threadsafe(gate.wait, 10)  # the loop is busy until the gate opens
    try:
        # An unkeyed write travels through the loop: it is outstanding while the loop is busy.
        streams.write("s-behind", TextDeltaChunk(agent_id="s1", agent_type="writer", content="first"))
        ended = threading.Event()
        ender = threading.Thread(target=lambda: (streams.end("s-behind"), ended.set()))
        ender.start()
        assert not ended.wait(0.3)  # the end waits behind the write (stored first, it would refuse it)
    finally:
        gate.set()
    ender.join(10)
    assert ended.is_set()
    assert contents(_stored(streams, "s-behind")) == ["first"]  # the write, then the end
    assert _status(manager, "s-behind") == "ended"
