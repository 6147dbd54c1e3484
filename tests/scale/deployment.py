"""A scaled-out deployment in real processes: ``helix-dbos serve --no-execute`` and ``helix-dbos worker``s.

Used by ``tests/scale`` and ``scripts/bench_queue.py``. Every process runs ``tests.scale.agents``
(the ``sleeper`` agent and its logging model) on one PostgreSQL database and one run queue.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
TOKEN = "scale-token-0123456789"
AGENTS = ["--agents", "tests.scale.agents:agents", "--llm-adapter", "tests.scale.agents:model"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Proc:
    """One ``helix-dbos`` process, its output in a log file."""

    name: str
    args: list[str]
    log: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] = field(init=False)

    def __post_init__(self) -> None:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "helix_dbos.cli", *self.args],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {text!r} in:\n{self.output()[-3000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return None
        return self.process.returncode


class Deployment:
    """One API server (``--no-execute``) and ``workers`` workers on ``database_url``, sharing ``queue``.

    With ``queue=None`` there is the API server alone, running its runs itself (no workers).
    """

    def __init__(
        self,
        database_url: str,
        workdir: Path,
        *,
        queue: str | None,
        workers: int,
        step_seconds: float,
        takeover_after: float = 3.0,
        agents: tuple[str, ...] = tuple(AGENTS),
        extra_args: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.url = database_url
        self.agents = list(agents)
        self.extra_args = list(extra_args)
        self.extra_env = dict(extra_env or {})
        self.workdir = workdir
        self.queue = queue
        self.calls_log = workdir / "calls.jsonl"
        self.calls_log.touch()
        self.port = free_port()
        self.step_seconds = step_seconds
        self.takeover_after = takeover_after
        self.workers: dict[str, Proc] = {}
        # Without a queue, the API server runs every run itself: today's single-process setup.
        queued = ["--queue", queue, "--no-execute"] if queue is not None else []
        self.api = Proc(
            "api",
            [
                "serve",
                *self.agents,
                *self.extra_args,
                "--database-url",
                database_url,
                "--port",
                str(self.port),
                *queued,
                "--executor-id",
                "api",
            ],
            workdir / "api.log",
            self._env("api"),
        )
        self.http = httpx.Client(
            base_url=f"http://127.0.0.1:{self.port}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )
        self._wait_http()
        for n in range(1, workers + 1):
            self.start_worker(f"w{n}")

    def _env(self, executor_id: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_RUN_QUEUE")}
        env.update(
            PYTHONPATH=str(REPO),
            HELIX_API_TOKENS=TOKEN,
            HELIX_EXECUTOR_ID=executor_id,
            HELIX_SCALE_LOG=str(self.calls_log),
            HELIX_SCALE_STEP_SECONDS=str(self.step_seconds),
        )
        env.update(self.extra_env)
        return env

    def _wait_http(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.api.process.poll() is not None:
                raise AssertionError(f"api exited:\n{self.api.output()[-3000:]}")
            try:
                if self.http.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"api did not start:\n{self.api.output()[-3000:]}")

    def start_worker(self, name: str) -> Proc:
        assert self.queue is not None, "workers need a queue"
        proc = Proc(
            name,
            [
                *("worker", *self.agents, *self.extra_args, "--database-url", self.url, "--queue", self.queue),
                *("--executor-id", name, "--takeover-after", str(self.takeover_after)),
            ],
            self.workdir / f"{name}.log",
            self._env(name),
        )
        proc.wait_for("worker up")
        self.workers[name] = proc
        return proc

    def start_run(self, text: str, priority: int | None = None, agent: str = "sleeper") -> str:
        body: dict[str, Any] = {"agent": agent, "input": text}
        if priority is not None:
            body["priority"] = priority
        response = self.http.post("/v1/runs", json=body)
        assert response.status_code == 202, response.text
        return str(response.json()["session_id"])

    def queue_status(self) -> dict[str, Any]:
        response = self.http.get("/v1/queue")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def session(self, session_id: str) -> dict[str, Any]:
        body: dict[str, Any] = self.http.get(f"/v1/sessions/{session_id}").json()
        return body

    def wait_done(self, session_ids: list[str], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        left = list(session_ids)
        while left:
            left = [s for s in left if self.session(s)["status"] != "completed"]
            if not left:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(left)} runs not completed, e.g. {self.session(left[0])}\n{self.logs()}")
            time.sleep(0.1)

    def calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.calls_log.read_text().splitlines() if line.strip()]

    def logs(self) -> str:
        procs = [self.api, *self.workers.values()]
        return "\n".join(f"--- {p.name}\n{p.output()[-2000:]}" for p in procs)

    def close(self) -> dict[str, int | None]:
        self.http.close()
        codes = {name: proc.stop() for name, proc in self.workers.items()}
        codes["api"] = self.api.stop()
        return codes


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end at the instant of a start does not overlap)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    best = current = 0
    for _, delta in events:
        current += delta
        best = max(best, current)
    return best
