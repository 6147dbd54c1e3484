"""``helix-dbos gc`` on the embedded SQLite default, as a user runs it: demo runs, a dry run, the real one."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.cli.conftest import cli_env, run_cli


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_gc_dry_run_then_gc_on_sqlite(tmp_path: Path) -> None:
    env = cli_env()
    assert run_cli("demo", cwd=tmp_path, env=env).returncode == 0
    store, system = tmp_path / ".helix" / "helix.sqlite", tmp_path / ".helix" / "helix-dbos.sqlite"
    chunks, workflows = _count(store, "helix_stream_chunks"), _count(system, "workflow_status")
    assert _count(store, "helix_sessions") == 1 and chunks > 0 and workflows >= 1

    dry = run_cli("gc", "--keep-days", "0", "--dry-run", "--json", cwd=tmp_path, env=env)
    assert dry.returncode == 0, dry.stderr
    would = json.loads(dry.stdout)
    assert would["dry_run"] is True and would["sessions_deleted"] == 1
    assert would["deleted"]["helix_stream_chunks"] == chunks
    assert _count(store, "helix_sessions") == 1  # nothing deleted

    done = run_cli("gc", "--keep-days", "0", "--batch", "3", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "helix_stream_chunks" in done.stdout and "deleted: 1 whole session(s)" in done.stdout
    for table in ("helix_sessions", "helix_runs", "helix_messages", "helix_stream_chunks", "helix_streams"):
        assert _count(store, table) == 0, table
    assert _count(system, "workflow_status") == workflows - 1


def test_gc_without_a_policy_is_one_line_with_a_hint(tmp_path: Path) -> None:
    proc = run_cli("gc", "--database-url", f"sqlite:///{tmp_path / 'h.sqlite'}", env=cli_env())
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "helix-dbos: gc needs a policy: give --keep-days, --keep-failed-days or --keep-last "
        "(add --dry-run to see what it would delete)"
    ]
