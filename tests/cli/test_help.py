"""``--version``, ``-h`` on every command, and help text without raw markup, readable at 80 columns.

Before: ``--version`` and ``-h`` were "No such option", and ``recover --help`` printed
reStructuredText (````takeover_after_seconds````) as it stood in the docstring. At 80 columns,
``serve --help`` gave its help text a 20-character column and cut a flag's name
(``--allow-unauthenti…``); ``serve``, ``worker`` and ``queue-status`` cut the ``--queue`` format;
``serve`` and ``recover`` kept the docstring's line breaks (ragged lines); every flag showed
``<bool>``, usage lines ``{session_id}``; ``queue-status --queue`` said "Enqueue runs on this DBOS
queue" (copied from serve) and ``sessions show`` listed ``--messages,--full``.
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
    assert "NAME[:SETTINGS]" in out and "worker_concurrency=N" in out


def _help_at_80(path: list[str]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "helix-dbos")
def test_help_is_whole_and_readable_at_80_columns(path: list[str]) -> None:
    out = _help_at_80(path)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    assert "…" not in out and "..." not in out.replace("[ARGS]...", ""), out  # nothing cut short
    assert "<bool>" not in out and "{" not in out and ",--" not in out, out
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        for option in [*param.opts, *param.secondary_opts]:
            if option.startswith("--"):  # every option's name whole, on one line
                assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", out), (option, out)
    assert not [line for line in lines if re.search(r"--[a-z]+-$", line)], out  # no name split at a hyphen
    description = out.split("\n\n", 1)[1].split("Options:")[0].split("Arguments:")[0].split("Commands:")[0]
    for paragraph in description.strip().split("\n\n"):
        wrapped = paragraph.splitlines()
        assert all(len(line) >= 50 for line in wrapped[:-1]), paragraph  # not ragged: full lines but the last


def test_each_queue_option_says_what_it_does_there() -> None:
    assert "Enqueue runs on this DBOS queue" in _help_at_80(["serve"])
    shown = _help_at_80(["queue-status"])
    assert "Enqueue" not in shown and "The run queue to show" in shown


def test_version_in_a_real_process() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"helix-dbos {__version__}\n", proc.stdout + proc.stderr
    short = run_cli("-h")
    assert short.returncode == 0 and "--version" in short.stdout and "sessions" in short.stdout
