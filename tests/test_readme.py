"""The README's promises hold: the quickstart demo command works, the crash demo recovers, and any
Python block runs (the examples live in ``docs/``, whose blocks ``tests/test_docs.py`` runs the same way).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.test_docs import PAGES, assert_public_names_only, bash_blocks, run_block

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.S | re.M)
CRASH_BLOCKS = [b for b in re.findall(r"^```bash\n(.*?)^```", README, flags=re.S | re.M) if "kill -9" in b]
INSPECT_BLOCKS = [b for text in PAGES.values() for b in bash_blocks(text) if "sessions list --json |" in b]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index: int, tmp_path: Path) -> None:
    run_block(BLOCKS[index], f"README block {index}", tmp_path)


def test_readme_code_uses_only_public_names() -> None:
    if BLOCKS:
        assert_public_names_only(BLOCKS)


def test_readme_links_every_docs_page() -> None:
    for page in PAGES:
        if page not in ("index.md", "api-top-level.md", "api-subpackages.md"):
            assert f"](docs/{page})" in README, page


def test_quickstart_demo_command_runs(tmp_path: Path) -> None:
    # One command line on a fresh machine, venv included (PEP 668 systems refuse a bare pip install).
    assert 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev]" && helix-dbos demo' in README
    proc = subprocess.run(
        [sys.executable, "-m", "helix_dbos.cli", "demo"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: completed" in proc.stdout
    assert '"warmest_city": "Tokyo"' in proc.stdout
    assert (tmp_path / ".helix" / "helix.sqlite").exists()


def test_readme_extras_table_matches_pyproject() -> None:
    """The install section's table lists every extra of pyproject.toml, and ``[all]`` is what it says."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    table = README.split("| Extra | Adds | For |", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^\| `\[(\w+)\]`", table, flags=re.M) == list(extras)
    parts = [e for e in extras if e not in ("all", "dev")]
    assert extras["all"] == [f"helix-dbos[{','.join(parts)}]"]
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    assert f"| `[all]` | all {words[len(parts)]} |" in table
    assert f"{words[len(parts)].capitalize()} extras add the rest" in " ".join(README.split())


def test_readme_crash_demo_recovers_the_killed_session(tmp_path: Path) -> None:
    """The kill-and-rerun block right after the quickstart, run as written (``helix-dbos`` = this checkout)."""
    assert len(CRASH_BLOCKS) == 1
    assert README.index(CRASH_BLOCKS[0]) < README.index("## Documentation")  # right after the quickstart
    script = CRASH_BLOCKS[0].replace("helix-dbos ", f"{sys.executable} -m helix_dbos.cli ")
    # The README's fixed ``sleep 4`` aims at the first tool calls on an idle machine; a loaded one can
    # take longer than that to start the demo. Kill at the same point by its own signal instead: the
    # first ``→ get_weather`` line (its tools then run for --step-delay seconds).
    assert script.count("& sleep 4; kill -9 $!") == 1, script
    wait = 'for _ in $(seq 900); do grep -qF "→ get_weather" first.log && break; sleep 0.1; done'
    script = script.replace("& sleep 4; kill -9 $!", f"> first.log 2>&1 & {wait}; kill -9 $!; cat first.log")
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    killed = re.search(r"session (session-[0-9a-f]+)\s+run", proc.stdout)
    assert killed is not None, proc.stdout
    assert f"recovered session {killed.group(1)}: completed" in proc.stdout, proc.stdout
    assert "status: completed" in proc.stdout


def test_docs_inspection_block_runs(tmp_path: Path) -> None:
    """The CLI block that looks at what the demo did (list, show, tail, fork; docs/cli.md), run as written."""
    assert len(INSPECT_BLOCKS) == 1
    script = "set -e\n" + INSPECT_BLOCKS[0].replace("helix-dbos ", f"{sys.executable} -m helix_dbos.cli ")
    script = script.replace("python -c", f"{sys.executable} -c")
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "get_weather" in proc.stdout  # show's timeline and tail's tool calls name the demo's tool
    assert "-b" in proc.stdout  # the fork's session id


def test_readme_test_command_is_what_ci_runs() -> None:
    assert "python -m pytest" in README
    assert "python3 -m pytest" in (REPO / ".ci" / "run").read_text()
