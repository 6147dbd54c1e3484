"""``serve`` and ``worker`` as a newcomer meets them: a busy port, no token, the banner, Ctrl-C.

Before: ``serve`` on a busy port printed that it was listening, launched DBOS and ran start-up
recovery on the database, then failed with uvicorn's ``[Errno 98]`` and 5 log lines (exit 3).
Without ``--token`` it said "pass authenticate=(request -> principal | None) or
bearer_tokens=[...], or allow_unauthenticated=True" (Python parameters, on the command line). The
banner named neither the database nor the inspector. Ctrl-C on an idle ``serve`` exited 130 and on
an idle ``worker`` 0. Now both exit 130 on Ctrl-C, the shell's code for "stopped by SIGINT", as
``demo`` and ``tail`` do, and 0 on SIGTERM (a supervisor's normal stop).
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

from typer.testing import CliRunner

from helix_dbos.cli import app
from tests.cli.conftest import run_cli
from tests.cli_process import CliProcess, cli_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_on_a_busy_port_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli("serve", "--agents", "demo", "--token", "t", "--port", str(port), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("helix-dbos serve: cannot listen on 127.0.0.1:") and "--port" in line, line
    assert list(tmp_path.iterdir()) == []  # no database made, no DBOS launched, no recovery run


def test_serve_without_a_token_names_the_options_not_python_parameters() -> None:
    result = CliRunner().invoke(app, ["serve", "--agents", "demo"], env={"HELIX_API_TOKENS": ""})
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line, line
    for needed in ("--token TOKEN", "HELIX_API_TOKENS", "--allow-unauthenticated"):
        assert needed in line, line
    assert "bearer_tokens=" not in line and "authenticate=" not in line and "True" not in line, line


def _interrupt(proc: CliProcess) -> int:
    os.kill(proc.process.pid, signal.SIGINT)
    return proc.wait(timeout=60)


def test_serve_names_its_database_and_inspector_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    port = _free_port()
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    serve = CliProcess(
        tmp_path,
        "serve",
        "--agents",
        "demo",
        "--token",
        "t",
        "--port",
        str(port),
        "--database-url",
        url,
        env=cli_env(HELIX_EXECUTOR_ID="serve-ctrl-c"),
    )
    banner = serve.wait_for(r"helix-dbos serve: ").string
    assert f"http://127.0.0.1:{port}/ui" in banner and url in banner, banner
    assert "trip-planner" in banner, banner
    serve.wait_for(r"Uvicorn running|Application startup complete")
    assert _interrupt(serve) == 130, serve.output


def test_worker_ctrl_c_exits_130_like_serve(tmp_path: Path) -> None:
    worker = CliProcess(tmp_path, "worker", "--agents", "demo", env=cli_env(HELIX_EXECUTOR_ID="worker-ctrl-c"))
    worker.wait_for("worker up")
    assert _interrupt(worker) == 130, worker.output
