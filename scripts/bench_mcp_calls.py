"""What a fresh MCP session per call costs, next to calls on one open session.

helix-dbos opens a session for every MCP listing and call (``helix_dbos.mcp.connection``), so no
connection is part of a run's durable state. This prints, side by side, the median time of one
tool call through that path and of one call on a session kept open (what a per-process session
cache would cost per call), for the test MCP server over stdio and over streamable HTTP.

Usage: python scripts/bench_mcp_calls.py [--calls 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix_dbos.mcp import MCPServer
from helix_dbos.mcp.connection import call_tool, open_session
from tests.mcp_tools.fixtures import http_server, stdio_server


async def _fresh(server: MCPServer, calls: int) -> list[float]:
    times = []
    for i in range(calls):
        started = time.perf_counter()
        await call_tool(server, "add", {"a": i, "b": 1})
        times.append(time.perf_counter() - started)
    return times


async def _open(server: MCPServer, calls: int) -> list[float]:
    times = []
    async with open_session(server) as session:
        for i in range(calls):
            started = time.perf_counter()
            await session.call_tool("add", {"a": i, "b": 1})
            times.append(time.perf_counter() - started)
    return times


def _ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10)
    calls = parser.parse_args().calls
    log = Path(tempfile.mkdtemp()) / "mcp.log"
    print(f"{'median of ' + str(calls) + ' calls':26} {'fresh session per call':>24} {'one open session':>18}")
    stdio = stdio_server(log)
    _row("stdio (process per call)", asyncio.run(_fresh(stdio, calls)), asyncio.run(_open(stdio, calls)))
    with http_server(log) as process:
        web = process.config()
        _row("streamable HTTP", asyncio.run(_fresh(web, calls)), asyncio.run(_open(web, calls)))


def _row(label: str, fresh: list[float], kept: list[float]) -> None:
    print(f"{label:26} {_ms(fresh):>24} {_ms(kept):>18}")


if __name__ == "__main__":
    main()
