"""AG-UI's own client in Node against a live ``helix-dbos serve``: the AG-UI endpoint, proven end to end.

``tests/node/agui_client.mjs`` drives ``HttpAgent`` from the pinned npm package ``@ag-ui/client``
(the agent class CopilotKit and other AG-UI front ends build on) against a real server process on
PostgreSQL with the scripted agents of ``tests/service/agents.py``: a text run streamed end to end,
a client-executed tool answered by the client in a new run (HITL), an approval answered through
the protocol's interrupt and resume, the custom state as ``STATE_SNAPSHOT`` and ``STATE_DELTA``
over two turns, a dropped connection resumed with ``Last-Event-ID`` (and a replay from the run's
start for a client holding nothing), and refusals: a typed 422, and a RUN_ERROR with the code.
The library checks the order of every event and parses each against the protocol's schema, so any
drift of the protocol fails the script.

Needs ``tests/node/node_modules`` (``npm ci`` in ``tests/node``; ``.ci/run`` does it). Without it
the test skips, except under ``CI=true``, where a missing client is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.cli_process import REPO, CliProcess, cli_env
from tests.service.conftest import TOKEN, free_port

pytestmark = pytest.mark.postgres

NODE_DIR = REPO / "tests" / "node"


def _node() -> str:
    node = shutil.which("node")
    installed = (NODE_DIR / "node_modules" / "@ag-ui" / "client" / "package.json").is_file()
    if node is None or not installed:
        missing = "node" if node is None else "tests/node/node_modules (run `npm ci` in tests/node)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"the AG-UI client test needs {missing}; .ci/run installs it")
        pytest.skip(f"the AG-UI client test needs {missing}")
    return node


@pytest.mark.parametrize(
    "hot_window_seconds", ["60", pytest.param("0.2", marks=pytest.mark.slow)], ids=["hot", "parked"]
)
def test_the_ag_ui_client_talks_to_serve(pg_database_url: str, tmp_path: Path, hot_window_seconds: str) -> None:
    """Hot: answers wake the waiting run. Parked (slow): runs park at once and an answer starts the continuation.

    About 20 s each: a server process starts (most of it), then six scenarios run through the Node client.
    """
    node = _node()
    port = free_port()
    server = CliProcess(
        tmp_path,
        "serve",
        "--agents",
        "tests.service.agents:agents",
        "--llm-adapter",
        "tests.service.agents:model",
        "--database-url",
        pg_database_url,
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
            [node, "agui_client.mjs", f"http://127.0.0.1:{port}", TOKEN],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
    assert client.returncode == 0, f"{client.stdout}\n{client.stderr}\n--- server ---\n{server.output[-4000:]}"
    summary = json.loads(client.stdout.strip().splitlines()[-1])
    assert summary["text"]["text"] == "echo: hello there"
    assert summary["clientTool"]["text"] == "Let me take a note first.Now I ask your browser.You are in Lima."
    assert summary["approval"]["text"] == 'Done: {"removed":"/tmp/x"}'
    assert summary["state"]["state"] == {"count": 10, "log": ["+2", "+3"]}
    assert summary["resume"]["text"].endswith("You are in Quito.")
    assert summary["resume"]["replayed"] == "Let me take a note first.Now I ask your browser.You are in Quito."
    assert summary["badInput"] == {"status": 422, "code": "validation_error", "inStream": "validation_error"}
