"""Stream filters: selection, slicing, combination and collection over async chunk streams."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import pytest

from helix_dbos.errors import HelixError
from helix_dbos.stream.chunks import (
    StreamChunk,
    TextDeltaChunk,
    ThinkingChunk,
    ToolEndChunk,
    ToolStartChunk,
)
from helix_dbos.stream.filters import (
    collect_all,
    collect_text,
    combine_streams,
    exclude_types,
    filter_by_agent_id,
    filter_by_agent_type,
    filter_by_type,
    filter_with,
    skip,
    take,
)
from helix_dbos.stream.memory import InMemoryStreamManager

TIMEOUT = 2.0


def text(content: str, agent_id: str = "parent", agent_type: str = "planner") -> TextDeltaChunk:
    return TextDeltaChunk(agent_id=agent_id, agent_type=agent_type, content=content)


MIXED: list[StreamChunk] = [
    text("Hel"),
    ThinkingChunk(agent_id="parent", agent_type="planner", content="hmm"),
    ToolStartChunk(agent_id="parent", agent_type="planner", tool_call_id="c1", tool_name="t", arguments={}),
    text("child says", agent_id="child", agent_type="researcher"),
    ToolEndChunk(agent_id="parent", agent_type="planner", tool_call_id="c1", tool_name="t", result=1),
    text("lo"),
]


async def source(chunks: Sequence[StreamChunk]) -> AsyncIterator[StreamChunk]:
    for chunk in chunks:
        await asyncio.sleep(0)
        yield chunk


def labels(chunks: list[StreamChunk]) -> list[str]:
    return [f"{c.type}:{c.content}" if isinstance(c, TextDeltaChunk | ThinkingChunk) else c.type for c in chunks]


async def test_collect_all_and_collect_text() -> None:
    assert await collect_all(source(MIXED)) == MIXED
    # Only text_delta content counts: thinking is not text, sub-agent text is (filter it if unwanted).
    assert await collect_text(source(MIXED)) == "Helchild sayslo"
    assert await collect_text(source([])) == ""


async def test_filter_by_agent_id_and_type() -> None:
    assert labels(await collect_all(filter_by_agent_id(source(MIXED), "child"))) == ["text_delta:child says"]
    assert await collect_text(filter_by_agent_id(source(MIXED), "parent")) == "Hello"
    assert len(await collect_all(filter_by_agent_type(source(MIXED), "planner"))) == 5
    assert await collect_all(filter_by_agent_type(source(MIXED), "nobody")) == []


async def test_filter_by_type_and_exclude_types() -> None:
    tools = await collect_all(filter_by_type(source(MIXED), ["tool_start", "tool_end"]))
    assert labels(tools) == ["tool_start", "tool_end"]
    no_thinking = await collect_all(exclude_types(source(MIXED), {"thinking"}))
    assert labels(no_thinking) == labels([c for c in MIXED if c.type != "thinking"])
    assert len(no_thinking) == len(MIXED) - 1


@pytest.mark.parametrize("bad", [["text-delta"], "text_delta"], ids=["typo", "bare-string"])
def test_type_filters_reject_unknown_names_at_the_call(bad: list[str] | str) -> None:
    # Raised eagerly, before iteration, so a typo cannot silently filter out everything.
    with pytest.raises(HelixError) as caught:
        filter_by_type(source(MIXED), bad)
    assert caught.value.code == "validation_error"
    with pytest.raises(HelixError):
        exclude_types(source(MIXED), bad)


async def test_filter_with_predicate() -> None:
    long_text = filter_with(source(MIXED), lambda c: isinstance(c, TextDeltaChunk) and len(c.content) > 2)
    assert labels(await collect_all(long_text)) == ["text_delta:Hel", "text_delta:child says"]


async def test_take_and_skip() -> None:
    assert await collect_all(take(source(MIXED), 2)) == MIXED[:2]
    assert await collect_all(take(source(MIXED), 100)) == MIXED
    assert await collect_all(take(source(MIXED), 0)) == []
    assert await collect_all(skip(source(MIXED), 4)) == MIXED[4:]
    assert await collect_all(skip(source(MIXED), 0)) == MIXED
    assert await collect_all(skip(source(MIXED), 100)) == []
    assert await collect_all(take(skip(source(MIXED), 1), 2)) == MIXED[1:3]


async def test_take_returns_without_waiting_on_a_live_stream() -> None:
    manager = InMemoryStreamManager()
    writer = await manager.create_writer("s1", "run-1", "planner")
    for word in ("a", "b", "c"):
        await writer.write(text(word))
    reader = await manager.create_reader("s1")
    assert reader is not None
    # The stream is still open: a take that pulled one chunk too many would hang here.
    first_two = await asyncio.wait_for(collect_all(take(reader, 2)), TIMEOUT)
    assert labels(first_two) == ["text_delta:a", "text_delta:b"]
    # take does not close its source: the reader goes on where take stopped.
    assert labels([await asyncio.wait_for(anext(reader), TIMEOUT)]) == ["text_delta:c"]


async def test_filters_compose_over_a_live_reader() -> None:
    manager = InMemoryStreamManager()
    writer = await manager.create_writer("s1", "run-1", "planner")
    reader = await manager.create_reader("s1")
    assert reader is not None
    collected = asyncio.create_task(collect_text(filter_by_agent_id(exclude_types(reader, ["thinking"]), "parent")))
    for chunk in MIXED:
        await writer.write(chunk)
        await asyncio.sleep(0)
    assert not collected.done()
    await manager.end_stream("s1")
    assert await asyncio.wait_for(collected, TIMEOUT) == "Hello"


async def test_combine_streams_interleaves_by_arrival() -> None:
    first_ready = asyncio.Event()
    second_ready = asyncio.Event()

    async def left() -> AsyncIterator[StreamChunk]:
        yield text("L1")
        first_ready.set()
        await second_ready.wait()
        yield text("L2")

    async def right() -> AsyncIterator[StreamChunk]:
        await first_ready.wait()
        yield text("R1")
        second_ready.set()

    combined = await asyncio.wait_for(collect_all(combine_streams(left(), right())), TIMEOUT)
    # L2 cannot come before R1: the left source waits for the right one, so arrival order is forced.
    assert labels(combined) == ["text_delta:L1", "text_delta:R1", "text_delta:L2"]


async def test_combine_streams_keeps_each_source_order_and_every_chunk() -> None:
    a = [text(f"a{i}") for i in range(20)]
    b = [text(f"b{i}") for i in range(15)]
    combined = await collect_all(combine_streams(source(a), source(b), source([])))
    assert len(combined) == 35
    assert [c for c in combined if isinstance(c, TextDeltaChunk) and c.content.startswith("a")] == a
    assert [c for c in combined if isinstance(c, TextDeltaChunk) and c.content.startswith("b")] == b
    assert await collect_all(combine_streams()) == []


async def test_combine_streams_raises_a_source_error_and_cancels_the_others() -> None:
    cancelled = asyncio.Event()

    async def failing() -> AsyncIterator[StreamChunk]:
        yield text("x")
        raise RuntimeError("source broke")

    async def endless() -> AsyncIterator[StreamChunk]:
        try:
            while True:
                await asyncio.sleep(0.01)
                yield text("tick")
        finally:
            cancelled.set()

    with pytest.raises(RuntimeError, match="source broke"):
        await asyncio.wait_for(collect_all(combine_streams(failing(), endless())), TIMEOUT)
    await asyncio.wait_for(cancelled.wait(), TIMEOUT)


async def test_closing_combined_stream_early_stops_the_sources() -> None:
    stopped = asyncio.Event()

    async def endless() -> AsyncIterator[StreamChunk]:
        try:
            while True:
                await asyncio.sleep(0)
                yield text("tick")
        finally:
            stopped.set()

    async with contextlib.aclosing(combine_streams(endless())) as combined:
        async for _chunk in combined:
            break
    await asyncio.wait_for(stopped.wait(), TIMEOUT)
