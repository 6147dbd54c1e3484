"""One stream's bad chunk never costs another stream its chunks; produced text is stored faithfully.

The flusher commits the chunks of many streams in one transaction (that is where its throughput
comes from). Before issue 9, one chunk the database refused (a NUL in a tool result) failed that
transaction and every other session in the batch lost its chunks. Now:

- text the database cannot take as is (NUL, lone surrogates) is escaped reversibly and comes back
  exactly as written;
- a batch that fails for a non-transient reason is written again stream by stream and, in the
  failing stream, chunk by chunk; a chunk that still cannot be stored is replaced, at its position,
  by an ``error`` chunk (``code="stream_gap"``, recoverable) that readers see, and the stream goes
  on;
- a stream that cannot be written at all fails only its own writer.
"""

from __future__ import annotations

import asyncio

import pytest

from helix_dbos.errors import HelixError
from helix_dbos.stream.chunks import ErrorChunk, StreamChunk, TextDeltaChunk, ToolEndChunk
from helix_dbos.stream.sql import SqlStreamManager
from tests.stream.conftest import MakeManager

NASTY = "a\x00b \ud800 \udfff \ufdd0 \ufdd00000 é😀 \\u0000"


def text(stream: str, content: str, step: int | None = 1) -> TextDeltaChunk:
    return TextDeltaChunk(agent_id=stream, agent_type="writer", content=content, step=step)


async def stored(manager: SqlStreamManager, stream_id: str) -> list[StreamChunk]:
    return [r.chunk for r in await manager.read_records(stream_id)]


async def read_live(manager: SqlStreamManager, stream_id: str) -> list[StreamChunk]:
    reader = await manager.create_reader(stream_id)
    assert reader is not None

    async def run() -> list[StreamChunk]:
        return [chunk async for chunk in reader]

    return await asyncio.wait_for(run(), 5)


async def test_nul_and_surrogates_in_one_stream_cost_no_other_stream_a_chunk(make_manager: MakeManager) -> None:
    # A long batching delay: every write below lands in one batch, one transaction.
    manager = make_manager(batch_max_delay=0.3, batch_max_chunks=1000)
    good = [f"good-{i}" for i in range(6)]
    writers = {sid: await manager.create_writer(sid, sid, "writer") for sid in [*good, "nasty"]}
    await manager.flush()
    for n in range(3):
        for sid in good:
            await writers[sid].write(text(sid, f"{sid} chunk {n}"))
        await writers["nasty"].write(text("nasty", f"{n} {NASTY}"))
    await writers["nasty"].write(
        ToolEndChunk(
            agent_id="nasty",
            agent_type="writer",
            tool_call_id=f"c{NASTY}",
            tool_name="t",
            result={f"k{NASTY}": [NASTY]},
            success=True,
        )
    )
    for writer in writers.values():
        await writer.flush()  # raises if any of the writer's chunks failed
    for sid in good:
        assert [c.content for c in await stored(manager, sid)] == [f"{sid} chunk {n}" for n in range(3)]  # type: ignore[union-attr]
    nasty = await stored(manager, "nasty")
    assert [c.content for c in nasty[:3]] == [f"{n} {NASTY}" for n in range(3)]  # type: ignore[union-attr]
    assert isinstance(nasty[3], ToolEndChunk) and nasty[3].result == {f"k{NASTY}": [NASTY]}
    assert nasty[3].tool_call_id == f"c{NASTY}"
    await manager.fail_stream("nasty", f"failed: {NASTY}")
    with pytest.raises(HelixError) as failure:
        await read_live(manager, "nasty")
    assert failure.value.message == f"failed: {NASTY}"


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_a_chunk_the_database_refuses_becomes_a_gap_marker_in_its_stream_only(
    make_manager: MakeManager,
) -> None:
    """A ``step`` beyond PostgreSQL's integer range is refused (22003) for that one chunk."""
    manager = make_manager(batch_max_delay=0.3, batch_max_chunks=1000)
    writers = {sid: await manager.create_writer(sid, sid, "writer") for sid in ("other", "broken")}
    await manager.flush()
    await writers["other"].write(text("other", "o1"))
    await writers["broken"].write(text("broken", "b1"))
    await writers["broken"].write(text("broken", "refused", step=2**40))
    await writers["broken"].write(text("broken", "b3"))
    await writers["other"].write(text("other", "o2"))
    await writers["other"].flush()
    await writers["broken"].flush()  # the stream goes on: the writer is not failed
    assert [c.content for c in await stored(manager, "other")] == ["o1", "o2"]  # type: ignore[union-attr]
    broken = await stored(manager, "broken")
    assert [type(c).__name__ for c in broken] == ["TextDeltaChunk", "ErrorChunk", "TextDeltaChunk"]
    gap = broken[1]
    assert isinstance(gap, ErrorChunk) and gap.code == "stream_gap" and gap.recoverable
    assert gap.agent_id == "broken" and "text_delta" in gap.error
    records = await manager.read_records("broken")
    assert [r.sequence for r in records] == [1, 2, 3]
    await manager.end_stream("broken")
    assert [c.type for c in await read_live(manager, "broken")] == ["text_delta", "error", "text_delta"]


async def test_a_stream_that_cannot_be_stored_fails_only_its_own_writer(make_manager: MakeManager) -> None:
    """A stream id the database refuses (NUL: an id is never escaped) fails alone."""
    manager = make_manager(batch_max_delay=0.3, batch_max_chunks=1000)
    good = await manager.create_writer("good", "good", "writer")
    await manager.flush()
    await manager.write_keyed("bad\x00id", text("bad", "x"), None)
    await good.write(text("good", "g1"))
    await good.write(text("good", "g2"))
    await good.flush()
    assert [c.content for c in await stored(manager, "good")] == ["g1", "g2"]  # type: ignore[union-attr]
