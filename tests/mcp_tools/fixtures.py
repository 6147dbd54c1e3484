"""The test MCP server (``mcp_test_server.py``) as a stdio config or a streamable HTTP process, and its log."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from helix_dbos.mcp import MCPServerStdio, MCPServerStreamableHTTP

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")


def stdio_server(log: Path, *, name: str = "calc", release: Path | None = None, **options: Any) -> MCPServerStdio:
    """The test server over stdio: a fresh ``python mcp_test_server.py stdio`` per listing and per call."""
    env = {"MCP_TEST_LOG": str(log)}
    if release is not None:
        env["MCP_TEST_RELEASE"] = str(release)
    return MCPServerStdio(name=name, command=sys.executable, args=(str(SERVER_SCRIPT), "stdio"), env=env, **options)


def server_log(log: Path) -> list[dict[str, Any]]:
    """What the server saw, in order (``{"kind": "list"}`` or ``{"kind": "call", "tool": ...}``)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def calls_of(log: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in server_log(log) if e["kind"] == kind]


def server_pids(log: Path) -> list[int]:
    """The server processes that answered anything, in the order they first did (stdio: one per session)."""
    return list(dict.fromkeys(entry["pid"] for entry in server_log(log)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class HttpServerProcess:
    """``mcp_test_server.py http PORT`` in a subprocess (uvicorn), killable mid-test."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        env = {**os.environ, "MCP_TEST_LOG": str(log)}
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT), "http", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, "the MCP HTTP server exited at start"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                assert time.monotonic() < deadline, "the MCP HTTP server did not start listening"
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def config(self, *, name: str = "web", **options: Any) -> MCPServerStreamableHTTP:
        return MCPServerStreamableHTTP(name=name, url=self.url, **options)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@contextmanager
def http_server(log: Path) -> Iterator[HttpServerProcess]:
    server = HttpServerProcess(log)
    try:
        yield server
    finally:
        server.kill()
