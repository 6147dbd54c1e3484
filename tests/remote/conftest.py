"""Two real ``helix-dbos serve`` processes, each on its own PostgreSQL database: A (the parent's
service) delegates to agents that B serves. Both can be SIGKILLed and started again on the same
port and database (:meth:`ServeProcess.kill`, :meth:`ServeProcess.start`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from helix_dbos.store.migrate import upgrade
from tests import pg
from tests.remote.agents import TOKEN
from tests.service.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class ServeProcess:
    """One ``helix-dbos serve`` on a fixed port, database and executor id (so a restart recovers its runs)."""

    def __init__(self, name: str, url: str, agents: str, logs: Path, env: dict[str, str]) -> None:
        self.name, self.url, self.agents, self.logs, self.env = name, url, agents, logs, env
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(base_url=self.base_url, headers=AUTH, timeout=30)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 30) -> None:
        self.starts += 1
        command = [
            sys.executable, "-m", "helix_dbos.cli", "serve",
            "--agents", self.agents,
            "--llm-adapter", "tests.remote.agents:model",
            "--database-url", self.url,
            "--executor-id", self.name,
            "--port", str(self.port),
        ]  # fmt: skip
        env = {**os.environ, **self.env, "HELIX_API_TOKENS": TOKEN, "PYTHONPATH": str(REPO)}
        log = (self.logs / f"{self.name}-{self.starts}.log").open("wb")
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited: {self.log_text()}")
            try:
                if self.http.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{self.name} did not start: {self.log_text()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs; DBOS recovers the process's workflows at its next start."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.http.close()

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.logs.glob(f"{self.name}-*.log")))


@dataclass
class Pair:
    a: ServeProcess
    b: ServeProcess
    shared: Path
    """``$HELIX_REMOTE_DIR``: the remote tool's execution log and gate."""

    def open_gate(self) -> None:
        (self.shared / "gate").touch()

    def dig_entries(self) -> list[str]:
        path = self.shared / "dig-entries"
        return path.read_text().split() if path.exists() else []


@pytest.fixture(scope="module")
def services(pg_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """A and B, started once per module (a start costs seconds): tests tell their runs apart by session."""
    logs = tmp_path_factory.mktemp("remote")
    names = [pg.unique_name("helix_remote_a"), pg.unique_name("helix_remote_b")]
    a_url, b_url = (pg.create_database(pg_server_url, name) for name in names)
    shared = logs / "shared"
    shared.mkdir()
    for url in (a_url, b_url):
        upgrade(url)
    b = ServeProcess("service-b", b_url, "tests.remote.agents:remote_agents", logs, {"HELIX_REMOTE_DIR": str(shared)})
    a = ServeProcess(
        "service-a",
        a_url,
        "tests.remote.agents:parent_agents",
        logs,
        {"HELIX_REMOTE_URL": b.base_url, "HELIX_REMOTE_DIR": str(shared)},
    )
    try:
        b.start()
        a.start()
        yield Pair(a, b, shared)
    finally:
        (shared / "gate").touch()  # release a tool still waiting
        a.stop()
        b.stop()
        for name in names:
            pg.drop_database(pg_server_url, name)


@pytest.fixture
def pair(services: Pair) -> Iterator[Pair]:
    """The module's services with a fresh execution log and a closed gate."""
    for name in ("gate", "dig-entries"):
        (services.shared / name).unlink(missing_ok=True)
    yield services
    services.open_gate()
