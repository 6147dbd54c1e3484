"""The CLI on the embedded default: demo, db upgrade, sessions list/show, recover."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env["PYTHONPATH"] = str(REPO)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "helix_dbos.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_commands_on_the_embedded_default(tmp_path: Path) -> None:
    upgraded = _cli(tmp_path, "db", "upgrade")
    assert upgraded.returncode == 0 and "up to date" in upgraded.stdout, upgraded.stderr
    demo = _cli(tmp_path, "demo", "--message", "Weather in Paris and Lima?")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    listed = _cli(tmp_path, "sessions", "list")
    assert listed.returncode == 0 and "trip-planner" in listed.stdout and "completed" in listed.stdout
    session_id = next(word for word in listed.stdout.split() if word.startswith("session-"))
    shown = _cli(tmp_path, "sessions", "show", session_id)
    assert shown.returncode == 0, shown.stderr
    assert "run " in shown.stdout and "no pending tool calls" in shown.stdout and "Paris" in shown.stdout
    missing = _cli(tmp_path, "sessions", "show", "nope")
    assert missing.returncode == 1 and "no session" in missing.stdout
    recovered = _cli(tmp_path, "recover", "--executor-id", "ghost-worker")
    assert recovered.returncode == 0 and "re-enqueued 0 run(s)" in recovered.stdout, recovered.stdout + recovered.stderr
