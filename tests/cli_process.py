"""Run ``python -m helix_dbos.cli`` as a real process and watch its output line by line.

The crash tests kill a demo with SIGKILL at a moment they see on its stdout, so they need the
output as it is printed, not when the process ends: a reader thread queues every line.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI process: this checkout first, no database or executor from outside."""
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env["PYTHONPATH"] = str(REPO)
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


class CliProcess:
    """A CLI process whose merged stdout/stderr is read line by line as it comes."""

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "helix_dbos.cli", *args],
            cwd=cwd,
            env=env or cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    @property
    def output(self) -> str:
        """Everything read so far."""
        self._drain(0)
        return "\n".join(self.lines)

    def _drain(self, timeout: float) -> bool:
        """Move queued lines to ``lines``; False once the output ended."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return True
            if line is None:
                self._queue.put(None)
                return False
            self.lines.append(line)
            if time.monotonic() >= deadline and self._queue.empty():
                return True

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """Block until a line matches ``pattern`` (a regex); fail with the output so far otherwise."""
        regex = re.compile(pattern)
        seen = 0
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines[seen:]:
                match = regex.search(line)
                if match:
                    return match
            seen = len(self.lines)
            if time.monotonic() >= deadline:
                raise AssertionError(f"no line matching {pattern!r} within {timeout}s:\n{self.output}")
            if not self._drain(0.05) and len(self.lines) == seen:
                raise AssertionError(
                    f"process ended (exit {self.process.wait()}) before a line matched {pattern!r}:\n{self.output}"
                )

    def kill(self) -> None:
        """SIGKILL: no cleanup of any kind runs in the process."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then wait for the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=5)
        self._drain(0)
        return code

    def wait(self, timeout: float = 120) -> int:
        """Wait for the process to end on its own."""
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=5)
        self._drain(0)
        return code
