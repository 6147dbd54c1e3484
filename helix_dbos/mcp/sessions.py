"""Open MCP sessions of the process, shared by every listing and call of every run, keyed by config.

Opening a session costs a process start for a stdio server (about two seconds for a Python one)
and a handshake over HTTP; a call on an open session costs milliseconds
(``scripts/bench_mcp_calls.py``). So a listing or call leases the open session of its server's
:meth:`~helix_dbos.mcp.servers.MCPServer.connection_key`, opening one only when there is none.

What a session is bound to, and so how this cache is built:

- **One event loop.** The SDK's sessions are anyio task groups and memory streams of the loop that
  opened them. Every session here is opened and used on the runtime's background loop
  (:data:`helix_dbos.runtime.aio.background_loop`), the one loop that DBOS step threads already
  hand their async work to; :func:`helix_dbos.mcp.connection.call_tool` routes a caller on another
  loop there. A lease taken on another loop is refused.
- **One owner task.** anyio requires a task group to be exited by the task that entered it, and a
  session outlives the call that opened it, so each session is entered, held and exited by its own
  task (:class:`OpenSession`); calls only send requests on it, from any task of that loop.
- **Nothing durable.** The cache is process memory: a run recovered in another process opens its
  own sessions from the config it recorded.

A session closes when it has been idle for its server's ``keep_alive_seconds``, when a call finds
it broken (:meth:`SessionCache.discard`), and when the process shuts down: ``shutdown()`` closes
every session (:meth:`SessionCache.aclose`, registered with the background loop's closers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from helix_dbos.mcp.servers import MCPServer

S = TypeVar("S")

_CLOSE_WAIT_SECONDS = 5.0
"""How long closing waits for a session's owner task (a stdio server gets terminated within it)."""

_log = logging.getLogger("helix_dbos.mcp")


class OpenSession(Generic[S]):
    """One session, entered, held and exited by its own task on the cache's loop."""

    def __init__(self, server: MCPServer, opener: Callable[[MCPServer], AbstractAsyncContextManager[S]]) -> None:
        self.server = server
        self.key = server.connection_key()
        self.session: S | None = None
        self.in_use = 0
        self.last_used = 0.0
        self._opener = opener
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def ended(self) -> bool:
        """The session's context has exited (it closed, or its transport failed under it)."""
        return self._task is not None and self._task.done()

    async def start(self) -> S:
        """Open the session (its owner task keeps it open); raise what opening raised."""
        self._task = asyncio.get_running_loop().create_task(self._own(), name=f"mcp-session-{self.server.name}")
        await self._ready.wait()
        if self.session is None:
            assert self._error is not None
            raise self._error
        return self.session

    async def _own(self) -> None:
        try:
            async with self._opener(self.server) as session:
                self.session = session
                self._ready.set()
                await self._closing.wait()
        except Exception as exc:  # opening failed, or the transport broke the context while held
            self._error = exc
        finally:
            self._ready.set()

    async def close(self) -> None:
        """Exit the session's context (for stdio: the server process ends); cancel it if it hangs."""
        self._closing.set()
        task = self._task
        if task is None or task.done():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), _CLOSE_WAIT_SECONDS)
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@dataclass(frozen=True)
class Lease(Generic[S]):
    """A session lent to one listing or call; :attr:`reused` says it served an earlier one."""

    entry: OpenSession[S]
    session: S
    reused: bool


class SessionCache(Generic[S]):
    """Open sessions by connection key, on one loop; bounded by each server's idle timeout."""

    def __init__(self, opener: Callable[[MCPServer], AbstractAsyncContextManager[S]]) -> None:
        self._opener = opener
        self._entries: dict[str, OpenSession[S]] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def _check_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None or self._loop.is_closed():
            self._loop = loop  # a closed loop took its sessions with it
            self._entries.clear()
            self._opening.clear()
        elif loop is not self._loop:
            raise RuntimeError("MCP sessions belong to the loop that opened them; run this on that loop")
        return loop

    @contextlib.asynccontextmanager
    async def lease(self, server: MCPServer, *, fresh: bool = False) -> AsyncIterator[Lease[S]]:
        """The open session for ``server`` (opened if none is, or ``fresh``), in use until the block ends."""
        loop = self._check_loop()
        lease = await self._acquire(server, fresh=fresh)
        lease.entry.in_use += 1
        try:
            yield lease
        finally:
            entry = lease.entry
            entry.in_use -= 1
            entry.last_used = loop.time()
            if entry.in_use == 0:
                self._schedule_idle_close(entry)

    async def _acquire(self, server: MCPServer, *, fresh: bool) -> Lease[S]:
        key = server.connection_key()
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:  # concurrent first calls open one session, not one each
            entry = self._entries.get(key)
            if entry is not None and (fresh or entry.ended or entry.session is None):
                self.discard(entry)
                entry = None
            if entry is not None:
                assert entry.session is not None
                return Lease(entry, entry.session, reused=True)
            entry = OpenSession(server, self._opener)
            try:
                session = await entry.start()
            except BaseException:
                await entry.close()  # a caller that timed out while opening leaves nothing half-open
                raise
            self._entries[key] = entry
            return Lease(entry, session, reused=False)

    def discard(self, entry: OpenSession[Any]) -> None:
        """Forget ``entry`` (a broken or expired session) and close it in the background."""
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
        asyncio.get_running_loop().create_task(entry.close())

    def _schedule_idle_close(self, entry: OpenSession[S]) -> None:
        keep_alive = entry.server.keep_alive_seconds
        loop = asyncio.get_running_loop()
        if keep_alive <= 0:
            self.discard(entry)
            return

        def expire() -> None:
            idle = loop.time() - entry.last_used
            if entry.in_use == 0 and idle >= keep_alive and self._entries.get(entry.key) is entry:
                _log.debug("closing the idle MCP session", extra={"mcp_server": entry.server.name})
                self.discard(entry)

        loop.call_later(keep_alive, expire)

    async def aclose(self) -> None:
        """Close every open session (at shutdown); the cache opens new ones if used again."""
        entries, self._entries = list(self._entries.values()), {}
        self._opening.clear()
        await asyncio.gather(*(entry.close() for entry in entries), return_exceptions=True)


__all__ = ["Lease", "OpenSession", "SessionCache"]
