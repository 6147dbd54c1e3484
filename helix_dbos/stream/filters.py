"""Stream filters: small async-iterator helpers over chunk streams (seed 002 "Stream Filters").

Each filter takes any ``AsyncIterable`` of chunks (a :class:`~helix_dbos.stream.base.StreamReader`,
another filter, an async generator) and returns an async generator (an ``AsyncIterator`` with
``aclose``), so they compose::

    text = await collect_text(filter_by_agent_id(reader, session_id))
    first_tools = take(filter_by_type(reader, ["tool_start"]), 3)

Filters are lazy: they pull from their source only while they are iterated, and pull no more than
they need (``take(live_reader, 2)`` returns after two chunks instead of waiting for a third). They
do not close their source: with Python's ``async for``, breaking out leaves the source open, so a
reader can be consumed further after ``take`` returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable

from helix_dbos.errors import HelixError
from helix_dbos.stream.chunks import STREAM_CHUNK_TYPES, StreamChunk, StreamResyncChunk, TextDeltaChunk

__all__ = [
    "collect_all",
    "collect_text",
    "combine_streams",
    "exclude_types",
    "filter_by_agent_id",
    "filter_by_agent_type",
    "filter_by_type",
    "filter_with",
    "skip",
    "take",
]


async def filter_with(
    stream: AsyncIterable[StreamChunk], predicate: Callable[[StreamChunk], bool]
) -> AsyncGenerator[StreamChunk, None]:
    """Yield the chunks for which ``predicate`` returns true."""
    async for chunk in stream:
        if predicate(chunk):
            yield chunk


def filter_by_agent_id(stream: AsyncIterable[StreamChunk], agent_id: str) -> AsyncGenerator[StreamChunk, None]:
    """Yield the chunks emitted by one agent (a session id: a parent or one of its sub-agents)."""
    return filter_with(stream, lambda chunk: chunk.agent_id == agent_id)


def filter_by_agent_type(stream: AsyncIterable[StreamChunk], agent_type: str) -> AsyncGenerator[StreamChunk, None]:
    """Yield the chunks emitted by agents of one definition."""
    return filter_with(stream, lambda chunk: chunk.agent_type == agent_type)


def _chunk_types(types: Iterable[str]) -> frozenset[str]:
    """Validate chunk type names now, so a typo fails at the call instead of filtering out everything."""
    if isinstance(types, str):
        raise HelixError(
            f"Expected an iterable of chunk types, got the string {types!r}; wrap it in a list",
            code="validation_error",
        )
    wanted = frozenset(types)
    unknown = wanted - STREAM_CHUNK_TYPES
    if unknown:
        raise HelixError(
            f"Unknown stream chunk type(s): {', '.join(sorted(unknown))}; "
            f"expected some of: {', '.join(sorted(STREAM_CHUNK_TYPES))}",
            code="validation_error",
        )
    return wanted


def filter_by_type(stream: AsyncIterable[StreamChunk], types: Iterable[str]) -> AsyncGenerator[StreamChunk, None]:
    """Yield only chunks whose ``type`` is in ``types``.

    Raises ``HelixError`` (``validation_error``) at the call for a name that is not a chunk type.
    """
    wanted = _chunk_types(types)
    return filter_with(stream, lambda chunk: chunk.type in wanted)


def exclude_types(stream: AsyncIterable[StreamChunk], types: Iterable[str]) -> AsyncGenerator[StreamChunk, None]:
    """Yield every chunk except those whose ``type`` is in ``types`` (validated as in ``filter_by_type``)."""
    unwanted = _chunk_types(types)
    return filter_with(stream, lambda chunk: chunk.type not in unwanted)


async def take(stream: AsyncIterable[StreamChunk], n: int) -> AsyncGenerator[StreamChunk, None]:
    """Yield the first ``n`` chunks, then stop without waiting for another one."""
    if n <= 0:
        return
    count = 0
    async for chunk in stream:
        yield chunk
        count += 1
        if count >= n:
            return


async def skip(stream: AsyncIterable[StreamChunk], n: int) -> AsyncGenerator[StreamChunk, None]:
    """Yield every chunk after the first ``n``."""
    count = 0
    async for chunk in stream:
        if count < n:
            count += 1
            continue
        yield chunk


class _SourceDone:
    """Queue marker: one source of ``combine_streams`` is exhausted."""


class _SourceFailed:
    """Queue marker: one source of ``combine_streams`` raised."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def combine_streams(*streams: AsyncIterable[StreamChunk]) -> AsyncGenerator[StreamChunk, None]:
    """Interleave several streams, yielding each chunk as soon as any source produces it.

    The order within one source is kept; across sources it is arrival order. If a source raises,
    the other sources are cancelled and the error is raised from the combined stream. Closing the
    combined stream early (``aclose()``, or ``contextlib.aclosing`` around a loop you may leave)
    cancels the tasks that pump the sources; otherwise they stop when the generator is collected.
    """
    if not streams:
        return
    # Size 1: a source is pulled only when the consumer is ready, so a slow consumer slows the
    # sources down instead of buffering everything.
    queue: asyncio.Queue[StreamChunk | _SourceDone | _SourceFailed] = asyncio.Queue(maxsize=1)

    async def pump(source: AsyncIterable[StreamChunk]) -> None:
        try:
            async for chunk in source:
                await queue.put(chunk)
        except Exception as error:
            await queue.put(_SourceFailed(error))
        else:
            await queue.put(_SourceDone())

    tasks = [asyncio.create_task(pump(source)) for source in streams]
    remaining = len(tasks)
    try:
        while remaining:
            item = await queue.get()
            if isinstance(item, _SourceDone):
                remaining -= 1
            elif isinstance(item, _SourceFailed):
                raise item.error
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def collect_all(stream: AsyncIterable[StreamChunk]) -> list[StreamChunk]:
    """Consume the stream to its end and return every chunk."""
    return [chunk async for chunk in stream]


async def collect_text(stream: AsyncIterable[StreamChunk]) -> str:
    """Consume the stream to its end and return the concatenated ``text_delta`` content.

    A ``stream_resync`` chunk voids the text its step had streamed so far (the attempt that wrote it
    died and the step ran again), so the result holds each step's final text once.
    """
    parts: list[tuple[str, int | None, str]] = []
    async for chunk in stream:
        if isinstance(chunk, TextDeltaChunk):
            parts.append((chunk.agent_id, chunk.step, chunk.content))
        elif isinstance(chunk, StreamResyncChunk):
            parts = [p for p in parts if not (p[0] == chunk.agent_id and p[1] == chunk.step)]
    return "".join(content for _, _, content in parts)
