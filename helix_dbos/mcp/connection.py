"""The I/O edge: list a server's tools or call one, on this process's open session to it.

Each listing and call leases the server's open session from the process-wide
:data:`session_cache` (:mod:`helix_dbos.mcp.sessions`), opening one only when there is none. A
session is process memory, never part of a run: a step that runs again, in this process or
another, finds or opens a session from the server's config. All of it runs on the runtime's
background loop, which owns every session; a caller on another loop is routed there.

A session found dead is replaced. Before a call, a session whose owner saw its transport end is
opened afresh. A call that then fails on a reused session because the session broke (the stdio
process died, the HTTP server restarted) is retried once on a fresh session, for a retry-safe tool
only: the request may have reached the server before it died, and a tool that must not run twice
(:attr:`MCPServer.retry_safe`) is not sent twice. Such a tool's call on a reused session is preceded
by a ping instead, so a session that died while idle is still replaced before anything is sent.

Failures come back as :class:`~helix_dbos.errors.MCPServerError` with one readable line (the SDK
raises exception groups from its task groups), which the tool step turns into the tool error the
model sees.

This module imports the ``mcp`` SDK (and ``httpx2``, its HTTP client, which the ``mcp`` extra
declares since this module uses it directly): only the runtime imports it, and only for an agent
that has MCP servers (the core stays importable without the extra).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, CallToolResult

from helix_dbos.errors import MCPServerError
from helix_dbos.mcp.servers import MCPServer, MCPServerStdio, MCPServerStreamableHTTP
from helix_dbos.mcp.sessions import Lease, SessionCache
from helix_dbos.mcp.tools import ListedTool, MCPCallResult
from helix_dbos.runtime.aio import background_loop

T = TypeVar("T")


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


session_cache: SessionCache[ClientSession] = SessionCache(open_session)
"""This process's open sessions (closed by ``shutdown()``, through the background loop's closers)."""
background_loop.add_closer(session_cache.aclose)


async def list_tools(server: MCPServer) -> list[ListedTool]:
    """Every tool the server offers (all pages), as plain data the listing step records."""
    try:
        with anyio.fail_after(server.timeout_seconds):
            return await _on_session_loop(_with_session(server, _list_all, retry_safe=True))
    except TimeoutError as exc:
        raise MCPServerError(server.name, f"no listing within {_seconds(server)}", timed_out=True) from exc
    except Exception as exc:
        raise MCPServerError(server.name, f"listing its tools failed: {_leaf_message(exc)}") from exc


async def _list_all(session: ClientSession) -> list[ListedTool]:
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


async def _next_page(session: ClientSession, cursor: str) -> Any:
    from mcp_types import PaginatedRequestParams

    return await session.list_tools(params=PaginatedRequestParams(cursor=cursor))


async def call_tool(
    server: MCPServer, tool_name: str, arguments: dict[str, Any], *, retry_safe: bool | None = None
) -> MCPCallResult:
    """Call one tool; a result the server marks as an error raises :class:`MCPServerError` with its text.

    ``retry_safe`` (default: the server config's word for the tool) decides whether a call that
    broke on a reused session is sent again on a fresh one.
    """
    safe = server.is_retry_safe(tool_name) if retry_safe is None else retry_safe

    async def send(session: ClientSession) -> CallToolResult:
        return await session.call_tool(tool_name, arguments)

    try:
        with anyio.fail_after(server.timeout_seconds):
            result = await _on_session_loop(_with_session(server, send, retry_safe=safe))
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


async def _with_session(server: MCPServer, request: Callable[[ClientSession], Awaitable[T]], *, retry_safe: bool) -> T:
    """Run ``request`` on the server's open session, replacing a dead one (see the module's docstring)."""
    async with session_cache.lease(server) as lease:
        if lease.reused and not retry_safe and not await _answers_ping(lease):
            session_cache.discard(lease.entry)  # died while idle: nothing was sent, open a fresh one
        else:
            try:
                return await request(lease.session)
            except Exception as exc:
                if not _session_broke(exc, lease):
                    raise
                session_cache.discard(lease.entry)
                if not (lease.reused and retry_safe):
                    raise
    async with session_cache.lease(server, fresh=True) as lease:
        return await request(lease.session)


async def _answers_ping(lease: Lease[ClientSession]) -> bool:
    try:
        await lease.session.send_ping()
    except Exception:
        return False
    return True


def _session_broke(exc: Exception, lease: Lease[ClientSession]) -> bool:
    """Whether ``exc`` says the session is gone, not that the server answered the request with an error."""
    if lease.entry.ended:
        return True
    leaf: BaseException = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    if isinstance(leaf, MCPError):
        return leaf.error.code == CONNECTION_CLOSED
    return isinstance(leaf, _TRANSPORT_FAILURES)


_TRANSPORT_FAILURES = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    OSError,
    httpx2.TransportError,
)
"""What a session's streams raise when the process or connection under them is gone."""


async def _on_session_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the background loop, which owns every session (from any caller's loop)."""
    loop = background_loop.loop
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def _seconds(server: MCPServer) -> str:
    return f"{server.timeout_seconds:g} s" if math.isfinite(server.timeout_seconds) else "its time limit"


def _leaf_message(exc: BaseException) -> str:
    """The first real cause in an exception group, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = ["call_tool", "list_tools", "open_session", "session_cache"]
