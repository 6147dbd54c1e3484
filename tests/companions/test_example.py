"""The critic-loop example meant for the README runs offline, in a fresh interpreter, on SQLite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).with_name("example_critic_loop.py")
REPO = Path(__file__).resolve().parents[2]


def test_the_critic_loop_example_runs_offline(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _readme_companion_block() -> str:
    """The docs' "Persistent companions" block (docs/sub-agents.md, the one that consults
    ``greeting-agent-critic``)."""
    readme = (REPO / "docs" / "sub-agents.md").read_text()
    [block] = [
        b for b in re.findall(r"^```python\n(.*?)^```", readme, flags=re.S | re.M) if "greeting-agent-critic" in b
    ]
    return block


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_readme_companion_block_runs_twice_in_one_directory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Its second run is turn 2 of the session ``greeting``, whose model uses the call ids of turn 1
    again: the critic's continuations take new run ids instead of failing on the ones turn 1 took."""
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env["PYTHONPATH"] = str(REPO)
    if backend == "postgres":
        env["HELIX_DATABASE_URL"] = request.getfixturevalue("new_migrated_database")("readme_twice")
    block = _readme_companion_block()
    again = block.replace("== [1, 2]", "== [1, 2, 3, 4]")  # the critic's turns after the second run
    assert again != block
    for script in (block, again):
        path = tmp_path / "companions.py"
        path.write_text(script)
        proc = subprocess.run(
            [sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "IntegrityError" not in proc.stdout + proc.stderr
