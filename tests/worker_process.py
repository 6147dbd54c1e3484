"""Start a crash-test worker script as a real process, without paying its imports each time.

A crash test starts two or three worker processes (``tests/runtime/crash_worker.py`` and its
siblings), SIGKILLs one and lets the next recover the run. Measured on a 2-core box, most of a
crash test's 20+ s was those processes importing Python modules: LiteLLM alone costs ~6 s of CPU,
DBOS, SQLAlchemy and helix-dbos another ~2.5 s, paid by every worker before it launches DBOS.

:func:`start_worker` forks each worker from a fork server (``multiprocessing``'s ``forkserver``)
that imported those modules once per test session. The worker is still a separate OS process that
launches its own DBOS, opens its own connections and is killed with a real SIGKILL; the next worker
is a new process that recovers the run from the database alone. Only the import work is shared:
the server never launches DBOS, opens a connection or starts a thread, so a fork starts clean.

The returned :class:`WorkerProcess` has the part of ``subprocess.Popen``'s interface the tests use
(``pid``, ``poll``, ``wait``, ``send_signal``, ``kill``, ``communicate``, ``returncode``, ``stdout``);
the worker's stdout and stderr go to one file, read by :attr:`WorkerProcess.output`.
"""

from __future__ import annotations

import atexit
import io
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from helix_dbos._litellm_import import OFFLINE_SWITCHES

REPO = Path(__file__).resolve().parents[1]
PRELOAD = [
    "helix_dbos",
    "helix_dbos.runtime.launch",
    "helix_dbos.testing",
    "litellm",
    # What LiteLLM imports lazily on its first OpenAI-compatible call (~1.5 s more per worker).
    "openai.resources",
    "openai.types",
    "litellm.llms.openai.openai",
    "litellm.litellm_core_utils.default_encoding",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.proxy._types",
    "litellm.proxy.openai_files_endpoints.common_utils",
    "litellm.integrations.prometheus_services",
    "litellm.llms.vertex_ai.vertex_ai_partner_models.anthropic.transformation",
    "anyio._backends._asyncio",
    "tests.worker_harness",
]
"""What the fork server imports once: everything every worker script needs before its first step.

A module missing here only costs time (the worker imports it); one that fails to import is skipped."""

# The fork server imports LiteLLM itself (above), so it needs LiteLLM's offline switches in the
# environment it starts with: without them that import fetches the model cost map from the network
# (three tries, seconds of back-off, on a machine without it).
for _name, _value in OFFLINE_SWITCHES:
    os.environ.setdefault(_name, _value)

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(PRELOAD)


def _run_script(script: str, argv: list[str], env: dict[str, str], cwd: str, output: str) -> None:
    """The child: point stdout and stderr at ``output`` and run ``script`` as ``__main__``."""
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = [script, *argv]
    sys.path.insert(0, str(Path(script).parent))  # as ``python script.py`` does
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        atexit._run_exitfuncs()  # a multiprocessing child ends with os._exit, which skips them


class WorkerProcess:
    """A forked worker, driven like ``subprocess.Popen`` (see the module docstring)."""

    def __init__(self, script: Path, args: Sequence[str], env: Mapping[str, str], cwd: Path) -> None:
        fd, self.output_path = tempfile.mkstemp(prefix="worker-", suffix=".log")
        os.close(fd)
        self.args = [str(script), *args]
        self._process = _CONTEXT.Process(
            target=_run_script,
            args=(str(script), list(args), dict(env), str(cwd), self.output_path),
            daemon=False,
        )
        self._process.start()
        assert self._process.pid is not None
        self.pid: int = self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit code, ``-N`` for a signal N, or ``None`` while running (as ``Popen.returncode``)."""
        return self._process.exitcode

    @property
    def output(self) -> str:
        """Everything the worker printed so far (stdout and stderr)."""
        return Path(self.output_path).read_text(errors="replace")

    @property
    def stdout(self) -> io.StringIO:
        """The output so far as a file object, for ``proc.stdout.read()`` in error messages."""
        return io.StringIO(self.output)

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0, output=self.output)
        return code

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        self.wait(timeout)
        return self.output, None

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def start_worker(
    script: Path, args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path = REPO
) -> WorkerProcess:
    """Start ``python script *args`` as a process forked from the preloaded server.

    ``env`` is the worker's whole environment (default: this process's, with ``PYTHONPATH`` set
    to the repository, as the tests' ``subprocess.Popen`` calls did).
    """
    return WorkerProcess(script, args, env if env is not None else {**os.environ, "PYTHONPATH": str(REPO)}, cwd)


def wait_for_crash_point(condition: Callable[[], bool], timeout: float, proc: WorkerProcess) -> None:
    """Poll ``condition`` until it holds; fail at once, with the worker's output, if the worker exited."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            raise AssertionError(f"worker exited early: {proc.stdout.read() if proc.stdout else ''}")
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the crash point")


def kill_then_recover(
    spawn: Callable[[bool], WorkerProcess],
    kill_when: Callable[[], bool],
    *,
    wait_seconds: float = 90,
    recover_seconds: float = 120,
) -> str:
    """SIGKILL the worker ``spawn(True)`` starts once ``kill_when()`` holds; return the output of the next.

    The second worker (``spawn(False)``) must recover the run from the database and print that it
    finished completed. Both processes are killed on the way out, whatever happened.
    """
    first = spawn(True)
    second: WorkerProcess | None = None
    try:
        deadline = time.time() + wait_seconds
        while not kill_when():
            assert first.poll() is None, f"worker exited early: {first.output}"
            assert time.time() < deadline, "timed out waiting for the crash point"
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL
        second = spawn(False)
        out, _ = second.communicate(timeout=recover_seconds)
        assert second.returncode == 0 and "finished completed" in out, out
        return out
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
