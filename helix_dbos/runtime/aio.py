"""A process-wide background event loop for async work called from sync DBOS steps.

The agent workflow is a *sync* DBOS workflow (measured: about half the per-step cost of an async
one here), but the LLM client and many tools are async. Async work from steps runs on this one
long-lived loop, so client connection pools (litellm's httpx/aiohttp sessions) live on a single
loop instead of one ``asyncio.run`` per call, and sync steps in worker threads can wait on it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """An event loop running forever in a daemon thread; :meth:`run` blocks until a coroutine ends."""

    def __init__(self, name: str = "helix-dbos-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def _serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=_serve, name=self._name, daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started on first use)."""
        return self._ensure()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the background loop and wait for its result from this (non-loop) thread."""
        loop = self._ensure()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("BackgroundLoop.run() called from its own loop; await the coroutine instead")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def add_closer(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Have :meth:`close_resources` await ``closer()`` (registered by the module that owns it).

        For what lives on this loop across runs (MCP sessions) and must not outlive ``shutdown()``.
        """
        with self._lock:
            if closer not in self._closers:
                self._closers.append(closer)

    def close_resources(self, timeout_seconds: float = 10.0) -> None:
        """Await every registered closer on the loop (``shutdown()`` calls this); errors are ignored."""
        with self._lock:
            closers = list(self._closers)
            loop = self._loop
        if not closers or loop is None or loop.is_closed():
            return

        async def _close_all() -> None:
            await asyncio.wait_for(
                asyncio.gather(*(closer() for closer in closers), return_exceptions=True), timeout_seconds
            )

        try:
            self.run(_close_all())
        except Exception:  # a resource that will not close must not keep the process from stopping
            return


background_loop = BackgroundLoop()
"""The shared instance used by the runtime."""
