"""``--version``, ``-h`` on every command, and help text without raw markup.

Before: ``--version`` and ``-h`` were "No such option", and ``recover --help`` printed
reStructuredText (````takeover_after_seconds````) as it stood in the docstring.
"""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from helix_dbos import __version__
from helix_dbos.cli import app
from tests.cli.conftest import run_cli


def _command_paths() -> list[list[str]]:
    root = typer.main.get_command(app)
    paths: list[list[str]] = [[]]

    def walk(group: object, prefix: list[str]) -> None:
        for name, command in sorted(getattr(group, "commands", {}).items()):
            paths.append([*prefix, name])
            walk(command, [*prefix, name])

    walk(root, [])
    return paths


COMMANDS = _command_paths()
RAW_MARKUP = re.compile(r"``|\[/?(bold|green|red|cyan|yellow|magenta|dim|blue)\b|\[/\]")


def test_every_command_is_listed() -> None:
    assert {" ".join(p) for p in COMMANDS} >= {
        "",
        "demo",
        "worker",
        "serve",
        "queue-status",
        "recover",
        "db",
        "db upgrade",
        "sessions",
        "sessions list",
        "sessions show",
        "tail",
        "fork",
    }


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "helix-dbos")
def test_h_is_help_without_raw_markup(path: list[str]) -> None:
    runner = CliRunner()
    short = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "100"})
    long = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert short.exit_code == 0, short.output
    assert short.output == long.output
    assert "Usage:" in short.output
    assert not RAW_MARKUP.search(short.output), short.output


def test_square_brackets_in_help_are_printed() -> None:
    out = CliRunner().invoke(app, ["worker", "-h"], env={"COLUMNS": "200"}).output
    assert "NAME[:concurrency=N" in out


def test_version_in_a_real_process() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"helix-dbos {__version__}\n", proc.stdout + proc.stderr
    short = run_cli("-h")
    assert short.returncode == 0 and "--version" in short.stdout and "sessions" in short.stdout
