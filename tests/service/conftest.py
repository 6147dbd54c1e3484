"""Fixtures for the service tests.

DBOS is a process singleton: like the runtime tests, each module that needs it launches it once on
a fresh database (``runtime_db``, re-exported from ``tests/runtime/conftest.py``) and builds one
executor per test (``make_executor``). On top of that:

- ``service``: an executor running the agents of ``tests/service/agents.py`` on the transcript-driven
  scripted model, and its app (bearer token ``TOKEN``);
- ``client``: an ``httpx.AsyncClient`` on that app through the ASGI transport (no port);
- ``live_url``: the same app served by uvicorn on a real port in a background thread, for SSE.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from helix_dbos.errors import HelixError
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service import create_app
from helix_dbos.stream.sql import SqlStreamManager
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db
from tests.service.agents import agents, model

__all__ = ["make_executor", "runtime_db"]

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Service:
    executor: DBOSAgentExecutor
    app: FastAPI


@pytest.fixture
def stream_backend() -> str:
    """The executor's stream manager: ``memory``, or ``sql`` (durable; what ``launch()`` uses)."""
    return "memory"


@pytest.fixture
def service(make_executor: ExecutorFactory, runtime_db: str, stream_backend: str) -> Iterator[Service]:
    manager = SqlStreamManager(runtime_db) if stream_backend == "sql" else None
    executor = make_executor(model(), agents, **({"stream_manager": manager} if manager else {}))
    yield Service(executor, create_app(executor, bearer_tokens=[TOKEN], sse_ping_seconds=1.0))
    # A run left waiting for a client would hold a DBOS thread past the module's DBOS.destroy().
    for session in executor.store.list_sessions(status="active", limit=1000):
        with contextlib.suppress(HelixError):
            executor.abort(session.session_id, "test teardown")
    if manager is not None:
        background_loop.run(manager.aclose())


@pytest.fixture
async def client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service", headers=AUTH) as http:
        yield http


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve(app: FastAPI, *, log_level: str = "warning") -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a background thread; yields its base URL."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), ws="none", log_level=log_level, timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def live_url(service: Service) -> Iterator[str]:
    """Serve ``service.app`` on 127.0.0.1 in a background thread; yields its base URL."""
    with serve(service.app) as url:
        yield url
