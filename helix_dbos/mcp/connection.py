"""The I/O edge: open a session to an MCP server, list its tools or call one, close it.

Every listing and every call opens its own session (a fresh subprocess for stdio, a fresh HTTP
session for streamable HTTP) and closes it before returning. Nothing live survives the step that
needed it, so there is no connection to lose when a worker dies: the step that runs again, in this
process or another, connects again from the server's config. The cost is a connection (for stdio,
a process start) per call; ``scripts/bench_mcp_calls.py`` prints it.

Failures come back as :class:`~helix_dbos.errors.MCPServerError` with one readable line (the SDK
raises exception groups from its task groups), which the tool step turns into the tool error the
model sees.

This module imports the ``mcp`` SDK: only the runtime imports it, and only for an agent that has
MCP servers (the core stays importable without the extra).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from helix_dbos.errors import MCPServerError
from helix_dbos.mcp.servers import MCPServer, MCPServerStdio, MCPServerStreamableHTTP
from helix_dbos.mcp.tools import ListedTool, MCPCallResult


@asynccontextmanager
async def open_session(server: MCPServer) -> AsyncIterator[ClientSession]:
    """An initialized session to ``server``, closed (and its process ended) on exit."""
    if isinstance(server, MCPServerStdio):
        params = StdioServerParameters(command=server.command, args=list(server.args), env=server.env, cwd=server.cwd)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session
        return
    assert isinstance(server, MCPServerStreamableHTTP)
    timeout = httpx2.Timeout(server.timeout_seconds)
    async with (
        httpx2.AsyncClient(headers=dict(server.headers), timeout=timeout) as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def list_tools(server: MCPServer) -> list[ListedTool]:
    """Every tool the server offers (all pages), as plain data the listing step records."""
    try:
        with anyio.fail_after(server.timeout_seconds):
            async with open_session(server) as session:
                tools: list[ListedTool] = []
                cursor: str | None = None
                while True:
                    page = await (session.list_tools() if cursor is None else _next_page(session, cursor))
                    tools.extend(
                        ListedTool(name=t.name, description=t.description or t.title or "", input_schema=t.input_schema)
                        for t in page.tools
                    )
                    cursor = page.next_cursor
                    if cursor is None:
                        return tools
    except TimeoutError as exc:
        raise MCPServerError(server.name, f"no listing within {_seconds(server)}", timed_out=True) from exc
    except Exception as exc:
        raise MCPServerError(server.name, f"listing its tools failed: {_leaf_message(exc)}") from exc


async def _next_page(session: ClientSession, cursor: str) -> Any:
    from mcp_types import PaginatedRequestParams

    return await session.list_tools(params=PaginatedRequestParams(cursor=cursor))


async def call_tool(server: MCPServer, tool_name: str, arguments: dict[str, Any]) -> MCPCallResult:
    """Call one tool; a result the server marks as an error raises :class:`MCPServerError` with its text."""
    try:
        with anyio.fail_after(server.timeout_seconds):
            async with open_session(server) as session:
                result: CallToolResult = await session.call_tool(tool_name, arguments)
    except TimeoutError as exc:
        late = f"tool {tool_name!r} gave no result within {_seconds(server)}"
        raise MCPServerError(server.name, late, timed_out=True) from exc
    except Exception as exc:
        raise MCPServerError(server.name, f"calling {tool_name!r} failed: {_leaf_message(exc)}") from exc
    content = [c.model_dump(mode="json", exclude_none=True, by_alias=True) for c in result.content]
    call = MCPCallResult(content=content, structured=result.structured_content)
    if result.is_error:
        raise MCPServerError(server.name, f"tool {tool_name!r} reported an error: {call.text() or 'no details'}")
    return call


def _seconds(server: MCPServer) -> str:
    return f"{server.timeout_seconds:g} s" if math.isfinite(server.timeout_seconds) else "its time limit"


def _leaf_message(exc: BaseException) -> str:
    """The first real cause in an exception group, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = ["call_tool", "list_tools", "open_session"]
