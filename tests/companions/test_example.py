"""The critic-loop example meant for the README runs offline, in a fresh interpreter, on SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).with_name("example_critic_loop.py")
REPO = Path(__file__).resolve().parents[2]


def test_the_critic_loop_example_runs_offline(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
