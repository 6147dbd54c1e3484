"""A read-only command run where there is no database says so in one line, and creates nothing.

Before: ``sessions list``, ``tail X``, ``queue-status``, ``recover --executor-id x``, ``sessions
show`` and ``fork`` run in a directory with no database each created ``.helix/helix.sqlite`` and
``.helix/helix-dbos.sqlite`` and then advised ``helix-dbos db upgrade`` (which makes an empty
database) or printed ``database error: no such table: main.workflow_status``. The likely cause is
the directory (or a missing ``--database-url``), and that is what the line says now. Commands that
write (``demo``, ``serve``, ``worker``, ``db upgrade``) still create the database.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import cli_env, run_cli

READ_ONLY = [
    ["sessions", "list"],
    ["sessions", "show", "some-session"],
    ["tail", "some-session"],
    ["queue-status"],
    ["recover", "--executor-id", "gone"],
    ["fork", "some-session"],
]


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_a_read_only_command_where_there_is_no_database_creates_nothing(command: list[str], tmp_path: Path) -> None:
    proc = run_cli(*command, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "helix-dbos: no helix-dbos database at sqlite:///.helix/helix.sqlite: run this in the directory where "
        "the agents run, or pass --database-url (or set HELIX_DATABASE_URL)"
    ], proc.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_queue_status_on_a_database_nothing_has_run_on_yet_is_an_empty_queue(tmp_path: Path) -> None:
    assert run_cli("db", "upgrade", cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in (tmp_path / ".helix").iterdir())
    proc = run_cli("queue-status", cwd=tmp_path, env=cli_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "queue helix-runs: 0 waiting, 0 running", proc.stdout
    assert sorted(p.name for p in (tmp_path / ".helix").iterdir()) == before  # no DBOS file made to read it
