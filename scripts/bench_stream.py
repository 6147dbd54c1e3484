"""Throughput and latency of SqlStreamManager on PostgreSQL (NOTIFY, polling) and SQLite.

Throughput: one writer queues N text_delta chunks as fast as it can, then flushes; chunks/s is N
over the time from the first write to the end of the flush (every chunk committed).

Latency: a writer emits M chunks about `--interval-ms` apart; a reader on another thread, with an
event loop of its own, follows the stream live. Latency is receive time minus emit time (one clock,
one process). "two managers" gives the reader its own manager, as a reader in another process
would have, so it is woken by NOTIFY or by polling; "one manager" shares the writer's manager, as
an SSE handler in the runtime's process does, so it is woken directly after the commit.

Usage:  python scripts/bench_stream.py [--chunks 20000] [--latency-chunks 500] [--interval-ms 5]
Without HELIX_BENCH_DATABASE_URL (a PostgreSQL server URL on which the script may create a
database) it starts a throw-away cluster (tests/pg.py). SQLite runs in a temporary file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix_dbos.store.engine import create_engine_for
from helix_dbos.store.migrate import upgrade
from helix_dbos.stream.chunks import TextDeltaChunk
from helix_dbos.stream.sql import SqlStreamManager
from tests import pg


def delta(n: int) -> TextDeltaChunk:
    return TextDeltaChunk(agent_id="bench", agent_type="writer", content=f"{n} token", step=1)


async def throughput(url: str, chunks: int, streams: int = 1, **options: Any) -> float:
    """Chunks/s for ``chunks`` text deltas spread over ``streams`` concurrent writers."""
    manager = SqlStreamManager(url, **options)
    try:
        prefix = f"tp-{time.monotonic_ns()}"
        writers = [await manager.create_writer(f"{prefix}-{i}", "run", "writer") for i in range(streams)]
        per_stream = chunks // streams

        async def produce(index: int) -> None:
            writer = writers[index]
            for n in range(per_stream):
                await writer.write(delta(n), dedupe_key=f"run:{n}")
                if streams > 1 and n % 16 == 15:
                    await asyncio.sleep(0)  # let the writers interleave, as concurrent runs do

        started = time.perf_counter()
        await asyncio.gather(*(produce(i) for i in range(streams)))
        await manager.flush()
        elapsed = time.perf_counter() - started
        for i in range(streams):
            info = await manager.get_stream_info(f"{prefix}-{i}")
            assert info is not None and info.chunk_count == per_stream, info
        return per_stream * streams / elapsed
    finally:
        await manager.aclose()


@dataclass
class Latency:
    p50_ms: float
    p95_ms: float
    max_ms: float


async def latency(
    url: str,
    count: int,
    interval: float,
    *,
    shared: bool,
    writer_options: dict[str, Any],
    reader_options: dict[str, Any],
) -> Latency:
    writer_side = SqlStreamManager(url, **writer_options)
    reader_side = writer_side if shared else SqlStreamManager(url, **reader_options)
    stream_id = f"lat-{time.monotonic_ns()}"
    emitted: dict[int, float] = {}
    received: dict[int, float] = {}
    ready = threading.Event()
    failure: list[BaseException] = []

    async def follow() -> None:
        reader = await reader_side.create_reader(stream_id)
        assert reader is not None
        ready.set()
        async for chunk in reader:
            assert isinstance(chunk, TextDeltaChunk)
            received[int(chunk.content.split()[0])] = time.perf_counter()

    def run_reader() -> None:
        try:
            asyncio.run(follow())
        except BaseException as exc:  # reported below
            failure.append(exc)
            ready.set()

    try:
        writer = await writer_side.create_writer(stream_id, "run", "writer")
        thread = threading.Thread(target=run_reader, daemon=True)
        thread.start()
        await asyncio.to_thread(ready.wait, 10)
        await asyncio.sleep(0.3)  # let the reader park (and its LISTEN connection come up)
        for n in range(count):
            emitted[n] = time.perf_counter()
            await writer.write(delta(n))
            await asyncio.sleep(interval)
        await writer_side.end_stream(stream_id)
        await asyncio.to_thread(thread.join, 30)
        if failure:
            raise failure[0]
    finally:
        await writer_side.aclose()
        if not shared:
            await reader_side.aclose()
    assert len(received) == count, f"reader got {len(received)} of {count}"
    samples = sorted((received[n] - emitted[n]) * 1000 for n in range(count))
    return Latency(
        p50_ms=statistics.median(samples),
        p95_ms=samples[int(len(samples) * 0.95) - 1],
        max_ms=samples[-1],
    )


async def bench(pg_url: str, sqlite_url: str, args: argparse.Namespace) -> None:
    interval = args.interval_ms / 1000
    engine = create_engine_for(pg_url)
    with engine.connect() as conn:
        settings = {name: conn.exec_driver_sql(f"SHOW {name}").scalar() for name in ("fsync", "synchronous_commit")}
    engine.dispose()
    print(f"PostgreSQL server: fsync={settings['fsync']}, synchronous_commit={settings['synchronous_commit']}")
    print(f"Throughput: {args.chunks} text_delta chunks, batch 64 (default), dedupe keys on")
    for name, url, streams, options in [
        ("PostgreSQL, NOTIFY", pg_url, 1, {}),
        ("PostgreSQL, no NOTIFY", pg_url, 1, {"notify": False}),
        ("PostgreSQL, 16 streams", pg_url, 16, {}),
        ("SQLite", sqlite_url, 1, {}),
        ("SQLite, 16 streams", sqlite_url, 16, {}),
    ]:
        rate = await throughput(url, args.chunks, streams, **options)
        print(f"  {name:<24} {rate:>10,.0f} chunks/s")

    print(
        f"\nLatency emit -> reader: {args.latency_chunks} chunks {args.interval_ms:g} ms apart, "
        "reader on another thread and loop (p50 / p95 / max, ms)"
    )
    no_notify = {"notify": False}
    cases: list[tuple[str, str, bool, dict[str, Any], dict[str, Any]]] = [
        ("PostgreSQL, two managers, NOTIFY", pg_url, False, {}, {}),
        ("PostgreSQL, two managers, NOTIFY, delay 0", pg_url, False, {"batch_max_delay": 0.0}, {}),
        ("PostgreSQL, two managers, polling 50 ms", pg_url, False, no_notify, no_notify),
        ("PostgreSQL, one manager", pg_url, True, {}, {}),
        ("SQLite, two managers, polling 50 ms", sqlite_url, False, {}, {}),
        ("SQLite, one manager", sqlite_url, True, {}, {}),
    ]
    for name, url, shared, writer_options, reader_options in cases:
        result = await latency(
            url,
            args.latency_chunks,
            interval,
            shared=shared,
            writer_options=writer_options,
            reader_options=reader_options,
        )
        print(f"  {name:<42} {result.p50_ms:7.1f} / {result.p95_ms:7.1f} / {result.max_ms:7.1f}")


def sse_latency(pg_url: str, count: int, interval_ms: float) -> list[float]:
    """Emit -> SSE client: a writer (its own manager, as in another process) emits deltas; a real HTTP
    client reads them from ``GET /v1/sessions/{id}/stream`` served by uvicorn on 127.0.0.1."""
    import json
    import socket
    import threading
    import time

    import httpx
    import uvicorn

    from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SqlSessionStore
    from helix_dbos.service import create_app

    store = SqlSessionStore(pg_url)
    session_id = f"sse-{pg.unique_name('s')}"
    store.create_session(session_id, agent_type="bench", custom_state={}, now_ms=int(time.time() * 1000))
    executor = DBOSAgentExecutor(store, llm_adapter=MockLLMAdapter([]), stream_manager=SqlStreamManager(pg_url))
    executor.streams.open(session_id, "run", "bench")  # as execute() does before a run starts
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(executor, allow_unauthenticated=True), host="127.0.0.1", port=port, log_level="error")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    latencies: list[float] = []
    ready = threading.Event()

    def read() -> None:
        with (
            httpx.Client(timeout=30) as client,
            client.stream("GET", f"http://127.0.0.1:{port}/v1/sessions/{session_id}/stream") as response,
        ):
            ready.set()
            for line in response.iter_lines():
                if line.startswith("data:") and '"text_delta"' in line:
                    chunk = json.loads(line[5:])
                    latencies.append((time.perf_counter() - float(chunk["content"])) * 1000)
                    if len(latencies) >= count:
                        return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ready.wait(10)
    time.sleep(0.3)

    async def write() -> None:
        writer_manager = SqlStreamManager(pg_url)
        writer = await writer_manager.create_writer(session_id, "run", "bench")
        for _ in range(count):
            chunk = TextDeltaChunk(agent_id="run", agent_type="bench", content=repr(time.perf_counter()))
            await writer.write(chunk)
            await asyncio.sleep(interval_ms / 1000)
        await writer_manager.aclose()

    asyncio.run(write())
    reader.join(30)
    server.should_exit = True
    executor.close()
    from helix_dbos.runtime.aio import background_loop

    manager = executor.streams.manager
    assert isinstance(manager, SqlStreamManager)
    background_loop.run(manager.aclose())
    store.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--latency-chunks", type=int, default=500)
    parser.add_argument("--interval-ms", type=float, default=5.0)
    args = parser.parse_args()

    server_url = os.environ.get("HELIX_BENCH_DATABASE_URL")
    cluster = None
    if not server_url:
        print("Starting a throw-away PostgreSQL cluster (set HELIX_BENCH_DATABASE_URL to use a server)...")
        cluster = pg.start_local_cluster()
        server_url = cluster.url
    name = pg.unique_name("helix_bench_stream")
    pg_url = pg.create_database(server_url, name)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{tmp}/bench.sqlite"
        try:
            upgrade(pg_url)
            upgrade(sqlite_url)
            asyncio.run(bench(pg_url, sqlite_url, args))
            sse = sorted(sse_latency(pg_url, 300, args.interval_ms))
            if sse:
                p50, p95 = sse[len(sse) // 2], sse[min(len(sse) - 1, int(0.95 * len(sse)))]
                print(
                    f"\nEnd to end emit -> SSE client (PostgreSQL NOTIFY, uvicorn on 127.0.0.1, {len(sse)} deltas):"
                    f" p50 {p50:.1f} ms, p95 {p95:.1f} ms"
                )
        finally:
            pg.drop_database(server_url, name)
            if cluster is not None:
                cluster.stop()


if __name__ == "__main__":
    main()
