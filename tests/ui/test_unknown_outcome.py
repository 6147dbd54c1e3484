"""The inspector shows a not-retry-safe call whose server died mid-call, and the operator decides.

A real ``helix-dbos serve`` runs ``cashier``; its ``charge`` tool SIGKILLs the server mid-call. A
second server on the same database and executor id recovers the run, which parks on a ``rerun``
approval instead of charging again. In the browser, the card says the outcome is unknown; the
operator denies the re-run, and the tool result the model got carries the "outcome unknown" badge.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import pg
from tests.cli_process import CliProcess, cli_env
from tests.service.conftest import free_port
from tests.ui.conftest import AUTH, TOKEN
from tests.ui.test_inspector import login, pending_card

pytestmark = pytest.mark.postgres


def _serve(cwd: Path, url: str, marker: Path) -> tuple[CliProcess, str]:
    port = free_port()
    server = CliProcess(
        cwd,
        "serve",
        "--agents",
        "tests.ui.unsafe_agents:agents",
        "--llm-adapter",
        "tests.ui.unsafe_agents:model",
        "--database-url",
        url,
        "--port",
        str(port),
        "--executor-id",
        "ui-unsafe",
        "--token",
        TOKEN,
        env=cli_env(HELIX_TEST_CRASH_MARKER=str(marker)),
    )
    server.wait_for("Uvicorn running", timeout=90)
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    name = pg.unique_name("helix_ui_unsafe")
    yield pg.create_database(pg_server_url, name)
    pg.drop_database(pg_server_url, name)


def test_the_operator_sees_the_unknown_outcome_and_denies_the_rerun(page: Any, database: str, tmp_path: Path) -> None:
    marker = tmp_path / "charge-started"
    first, base = _serve(tmp_path, database, marker)
    servers = [first]
    try:
        with httpx.Client(base_url=base, headers=AUTH, timeout=10) as http:
            started = http.post("/v1/runs", json={"agent": "cashier", "input": "pay"})
            assert started.status_code == 202, started.text
            session_id = started.json()["session_id"]
        first.process.wait(timeout=60)  # the charge killed it
        assert marker.exists()

        second, base = _serve(tmp_path, database, marker)
        servers.append(second)
        with httpx.Client(base_url=base, headers=AUTH, timeout=10) as http:
            deadline = time.monotonic() + 30
            while not (pending := http.get(f"/v1/sessions/{session_id}").json()["pending_tool_calls"]):
                assert time.monotonic() < deadline, "the recovered run did not ask for a re-run"
                time.sleep(0.1)
            assert [(p["tool_name"], p["kind"]) for p in pending] == [("charge", "rerun")]

            login(page, base)
            page.goto(f"{base}/ui#/s/{session_id}")
            card = pending_card(page, "charge")
            card.locator(".outcome-unknown", has_text="outcome unknown").wait_for()
            card.get_by_role("button", name="Deny").click()
            page.locator("li.msg-tool .badge.outcome-unknown").wait_for()

            result = http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 20}).json()
            assert result["status"] == "completed"
        assert marker.read_text() == f"{session_id}:pay-1"  # the one charge that started
    finally:
        for server in reversed(servers):
            if server.process.poll() is None:
                try:
                    server.stop(timeout=20)
                except subprocess.TimeoutExpired:
                    server.kill()
