"""What an MCP tool call costs: a fresh session per call, this process's cached session, and the SDK's bare session.

helix-dbos keeps no connection in a run's durable state; each listing and call leases this
process's open session to its server (``helix_dbos.mcp.sessions``). This prints, side by side, the
median time of one tool call through ``helix_dbos.mcp.connection.call_tool`` with
``keep_alive_seconds=0`` (a fresh session per call, for stdio a process start), through the same
call with the default keep-alive (the cached session: the first call opens it, the median is the
reuse), and of one call on a session held open with the SDK directly (the floor), for the test MCP
server over stdio and over streamable HTTP.

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
from helix_dbos.runtime.aio import background_loop
from tests.mcp_tools.fixtures import http_server, stdio_server


async def _through_call_tool(server: MCPServer, calls: int) -> list[float]:
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


def _row(label: str, server: MCPServer, calls: int) -> None:
    fresh = asyncio.run(_through_call_tool(server.model_copy(update={"keep_alive_seconds": 0}), calls))
    cached = asyncio.run(_through_call_tool(server, calls))
    background_loop.close_resources()
    bare = asyncio.run(_open(server, calls))
    print(f"{label:18} {_ms(fresh):>24} {_ms(cached):>22} {_ms(bare):>22}")


def _ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10)
    calls = parser.parse_args().calls
    log = Path(tempfile.mkdtemp()) / "mcp.log"
    heading = f"median of {calls} calls"
    print(f"{heading:18} {'fresh session per call':>24} {'cached session':>22} {'SDK session held open':>22}")
    _row("stdio", stdio_server(log), calls)
    with http_server(log) as process:
        _row("streamable HTTP", process.config(), calls)


if __name__ == "__main__":
    main()
