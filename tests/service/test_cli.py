"""``helix-dbos serve`` refuses to start without an authentication decision (no database needed)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from helix_dbos.cli import app
from helix_dbos.service.server import tokens_from_env

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


def test_tokens_from_env() -> None:
    assert tokens_from_env({"HELIX_API_TOKENS": " a, b ,,c "}) == ["a", "b", "c"]
    assert tokens_from_env({}) == []
