"""InMemoryStreamManager: what it does beyond the contract suite (``test_stream_manager_contract.py``)."""

from __future__ import annotations

import asyncio

from helix_dbos.stream.chunks import TextDeltaChunk
from helix_dbos.stream.memory import InMemoryStreamManager


def text(content: str) -> TextDeltaChunk:
    return TextDeltaChunk(agent_id="s1", agent_type="writer", content=content)


async def test_reader_counters_follow_writes_before_the_reader_reads() -> None:
    """In memory a reader's ``total_chunks`` / ``latest_sequence`` are live, not as of its last read."""
    manager = InMemoryStreamManager()
    writer = await manager.create_writer("s1", "run-1", "writer")
    for word in ("a", "b", "c", "d"):
        await writer.write(text(word))
    reader = await manager.create_resumable_reader("s1", from_sequence=4)
    assert reader is not None
    assert (reader.current_sequence, reader.total_chunks, reader.latest_sequence) == (4, 4, 4)

    await writer.write(text("e"))
    assert (reader.current_sequence, reader.total_chunks, reader.latest_sequence) == (4, 5, 5)
    chunk = await asyncio.wait_for(anext(reader), 2.0)
    assert isinstance(chunk, TextDeltaChunk) and chunk.content == "e"
    assert reader.current_sequence == 5


async def test_a_waiting_reader_wakes_without_a_poll() -> None:
    """Writes wake a parked in-memory reader within a few loop iterations: no timer is involved."""
    manager = InMemoryStreamManager()
    writer = await manager.create_writer("s1", "run-1", "writer")
    reader = await manager.create_resumable_reader("s1")
    assert reader is not None
    pending = asyncio.create_task(anext(reader))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not pending.done()
    await writer.write(text("a"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert pending.done()
    chunk = pending.result()
    assert isinstance(chunk, TextDeltaChunk) and chunk.content == "a"
