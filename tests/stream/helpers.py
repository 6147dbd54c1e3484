"""Helpers the stream tests share: chunk builders and time-bounded reads."""

from __future__ import annotations

import asyncio

from helix_dbos.stream.base import StreamReader
from helix_dbos.stream.chunks import StreamChunk, TextDeltaChunk

TIMEOUT = 5.0


def text(content: str, step: int | None = None, agent_id: str = "s1") -> TextDeltaChunk:
    return TextDeltaChunk(agent_id=agent_id, agent_type="writer", content=content, step=step)


def contents(chunks: list[StreamChunk]) -> list[str]:
    return [c.content if isinstance(c, TextDeltaChunk) else c.type for c in chunks]


async def next_chunk(reader: StreamReader) -> StreamChunk:
    return await asyncio.wait_for(anext(reader), TIMEOUT)


async def drain(reader: StreamReader) -> list[StreamChunk]:
    async def run() -> list[StreamChunk]:
        return [chunk async for chunk in reader]

    return await asyncio.wait_for(run(), TIMEOUT)


async def idle() -> None:
    """Long enough for a live reader to have picked up anything there was to pick up."""
    await asyncio.sleep(0.15)
