"""Run a protocol's own Node client (``tests/node/*.mjs``) against a live ``helix-dbos serve``.

The AI SDK and AG-UI client tests differ in the script and what they check of its summary; the
server process, the skip-or-fail when the client is not installed, and the failure report with the
server's output are the same, so they live here once.

Needs ``tests/node/node_modules`` (``npm ci`` in ``tests/node``; ``.ci/run`` does it). Without it
a test skips, except under ``CI=true``, where a missing client is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli_process import REPO, CliProcess, cli_env
from tests.service.conftest import TOKEN, free_port

NODE_DIR = REPO / "tests" / "node"


def node_for(package: str, what: str) -> str:
    """The ``node`` executable, once ``package`` is installed in ``tests/node``; else skip (fail under CI)."""
    node = shutil.which("node")
    installed = (NODE_DIR / "node_modules" / package / "package.json").is_file()
    if node is None or not installed:
        missing = "node" if node is None else "tests/node/node_modules (run `npm ci` in tests/node)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"the {what} test needs {missing}; .ci/run installs it")
        pytest.skip(f"the {what} test needs {missing}")
    return node


def run_client_against_serve(
    node: str, script: str, database_url: str, tmp_path: Path, hot_window_seconds: str
) -> dict[str, Any]:
    """Serve the scripted agents of ``tests/service/agents.py``, run ``script`` against it, return its summary.

    The script's last stdout line is its JSON summary; a non-zero exit fails the test with the
    client's output and the tail of the server's.
    """
    port = free_port()
    server = CliProcess(
        tmp_path,
        "serve",
        "--agents",
        "tests.service.agents:agents",
        "--llm-adapter",
        "tests.service.agents:model",
        "--database-url",
        database_url,
        "--port",
        str(port),
        "--hot-window-seconds",
        hot_window_seconds,
        "--token",
        TOKEN,
        env=cli_env(),
    )
    try:
        server.wait_for("Uvicorn running", timeout=60)
        client = subprocess.run(
            [node, script, f"http://127.0.0.1:{port}", TOKEN],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
    assert client.returncode == 0, f"{client.stdout}\n{client.stderr}\n--- server ---\n{server.output[-4000:]}"
    summary: dict[str, Any] = json.loads(client.stdout.strip().splitlines()[-1])
    return summary
