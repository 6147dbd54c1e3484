"""One real ``helix-dbos serve`` process for the multi-process service tests.

Shared by ``tests/service/test_two_servers.py`` (two servers on one database) and
``tests/remote/conftest.py`` (two services, each on its own database, one delegating to the other):
start it on a fixed port, database and executor id, wait for ``/healthz``, SIGKILL it (no shutdown
code runs; DBOS recovers its workflows at its next start on the same executor id), start it again,
and stop it with SIGTERM. Each start writes its own log file under ``logs``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from tests.service.conftest import free_port

REPO = Path(__file__).resolve().parents[1]


class ServeProcess:
    """``helix-dbos serve --agents AGENTS --llm-adapter LLM_ADAPTER`` on ``url`` as executor ``name``."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        agents: str,
        llm_adapter: str,
        token: str,
        logs: Path,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        http_timeout: float = 30,
    ) -> None:
        self.name, self.url, self.agents, self.llm_adapter, self.token = name, url, agents, llm_adapter, token
        self.logs, self.env, self.extra_args = logs, dict(env or {}), list(extra_args)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=http_timeout
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def log(self) -> Path:
        """The log file of the latest start."""
        return self.logs / f"{self.name}-{self.starts}.log"

    def spawn(self) -> None:
        """Start the process (without waiting for it to answer: :meth:`wait_ready`)."""
        self.starts += 1
        command = [
            sys.executable, "-m", "helix_dbos.cli", "serve",
            "--agents", self.agents,
            "--llm-adapter", self.llm_adapter,
            "--database-url", self.url,
            "--executor-id", self.name,
            "--port", str(self.port),
            *self.extra_args,
        ]  # fmt: skip
        env = {**os.environ, **self.env, "HELIX_API_TOKENS": self.token, "PYTHONPATH": str(REPO)}
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30) -> None:
        """Wait until ``/healthz`` answers 200; fail with the log if the process exits or never answers."""
        assert self.process is not None
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

    def start(self, timeout: float = 30) -> None:
        """Start the process and wait until it answers."""
        self.spawn()
        self.wait_ready(timeout)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs; DBOS recovers the process's workflows at its next start."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, *, fail_on_hang: bool = True) -> int | None:
        """SIGTERM and wait; its exit code (``None`` if it never started). SIGKILL if it hangs, and
        fail unless ``fail_on_hang`` is false."""
        self.http.close()
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            if not fail_on_hang:
                return self.process.returncode
            raise AssertionError(f"{self.name} did not stop on SIGTERM: {self.log_text()}") from None

    def log_text(self) -> str:
        """The tail of every start's log, oldest first."""
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.logs.glob(f"{self.name}-*.log")))
