"""``helix-dbos serve``: it refuses to start without an authentication decision (no database needed),
and it serves the demo agent with nothing but ``--agents demo``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from helix_dbos.cli import app
from helix_dbos.settings import HelixSettings
from tests.cli_process import CliProcess
from tests.service.conftest import AUTH, TOKEN, free_port

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {}, "--token"),
        ([], {"HELIX_API_TOKENS": " , ,"}, "--token"),
        (["--token", "t1", "--allow-unauthenticated"], {}, "contradicts"),
        (["--allow-unauthenticated"], {"HELIX_API_TOKENS": "t1"}, "contradicts"),
        (["--token", ""], {}, "non-empty"),
    ],
)
def test_serve_refuses_to_start_without_a_clear_auth_decision(
    args: list[str], env: dict[str, str], message: str
) -> None:
    # A database URL that cannot work: refusing must happen before anything touches it.
    result = runner.invoke(
        app,
        [
            "serve",
            "--agents",
            "tests.service.agents:agents",
            "--database-url",
            "postgresql://nobody@256.0.0.1/x",
            *args,
        ],
        env={"HELIX_API_TOKENS": "", **env},
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "helix-dbos serve:" in result.output


def test_tokens_come_from_the_settings() -> None:
    assert HelixSettings.from_env({"HELIX_API_TOKENS": " a, b ,,c "}).api_tokens == ("a", "b", "c")
    assert HelixSettings.from_env({}).api_tokens == ()


def test_serve_runs_the_demo_agent_with_no_python_written(pg_database_url: str, tmp_path: Path) -> None:
    port = free_port()
    server = CliProcess(
        tmp_path,
        "serve",
        "--agents",
        "demo",
        "--database-url",
        pg_database_url,
        "--port",
        str(port),
        "--executor-id",
        "serve-demo",
        "--token",
        TOKEN,
    )
    try:
        server.wait_for("Uvicorn running", timeout=60)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=30) as http:
            started = http.post("/v1/runs", json={"agent": "trip-planner", "input": "Weather in Lima and Tokyo?"})
            assert started.status_code == 202, started.text
            session_id = started.json()["session_id"]
            result = http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 30}).json()
        assert result["status"] == "completed", result
        assert result["output"]["warmest_city"] == "Tokyo"
    finally:
        assert server.stop() == 0, server.output
    assert "LLM Provider NOT provided" not in server.output
