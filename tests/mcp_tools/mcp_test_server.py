"""A real MCP server for the tests, on the ``mcp`` SDK's server API: stdio, or streamable HTTP.

``python mcp_test_server.py stdio`` serves on stdin/stdout; ``python mcp_test_server.py http PORT``
serves streamable HTTP at ``http://127.0.0.1:PORT/mcp`` with uvicorn. Every listing and every call
is appended (one JSON line, flushed) to the file named by ``MCP_TEST_LOG`` before it is answered,
so a test counts what the server saw across processes and crashes. ``slow`` writes its line, then
waits until the file named by ``MCP_TEST_RELEASE`` exists: a test can kill the worker while a
call is in flight. A server process started once that release file exists also offers ``late``:
a test sees whether a recovered run listed the tools again (it would offer ``late``) or replayed
its recorded listing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def _log(kind: str, **fields: Any) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, "pid": os.getpid(), **fields}) + "\n")
            f.flush()
            os.fsync(f.fileno())


class RecordingServer(MCPServer):
    """Logs every tools/list it answers."""

    async def list_tools(self) -> Any:
        _log("list")
        return await super().list_tools()


server: RecordingServer = RecordingServer("helix-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    _log("call", tool="add", arguments={"a": a, "b": b})
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    _log("call", tool="shout", arguments={"text": text})
    return text.upper()


@server.tool()
def explode(reason: str) -> str:
    """Always fails, with the reason."""
    _log("call", tool="explode", arguments={"reason": reason})
    raise ToolError(f"exploded: {reason}")


@server.tool()
def slow(tag: str) -> str:
    """Waits for the release file, then answers."""
    _log("call", tool="slow", arguments={"tag": tag})
    release = os.environ.get("MCP_TEST_RELEASE", "")
    deadline = time.monotonic() + 60
    while release and not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"slow done: {tag}"


if os.environ.get("MCP_TEST_RELEASE") and os.path.exists(os.environ["MCP_TEST_RELEASE"]):

    @server.tool()
    def late() -> str:
        """Only offered by servers started after the release."""
        return "late"


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
        return
    import uvicorn

    port = int(sys.argv[2])
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
