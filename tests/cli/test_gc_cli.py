"""``helix-dbos gc`` on the embedded SQLite default, as a user runs it: demo runs, a dry run, the real one."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_dbos.cli.gc import background_policy
from helix_dbos.cli.inputs import CliError
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


def test_a_worker_with_gc_every_deletes_in_the_background(tmp_path: Path) -> None:
    env = cli_env()
    assert run_cli("demo", cwd=tmp_path, env=env).returncode == 0
    store, system = tmp_path / ".helix" / "helix.sqlite", tmp_path / ".helix" / "helix-dbos.sqlite"
    workflows = _count(system, "workflow_status")
    command = [sys.executable, "-m", "helix_dbos.cli", "worker", "--agents", "demo"]
    worker = subprocess.Popen(
        [*command, "--gc-every", "0.2", "--gc-policy", '{"keep_days": 0}'],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def left() -> tuple[int, int, int]:  # a round claims the session first, deletes its DBOS rows last
            sessions, chunks = _count(store, "helix_sessions"), _count(store, "helix_stream_chunks")
            return sessions, chunks, _count(system, "workflow_status")

        deadline = time.time() + 60
        while left() != (0, 0, workflows - 1) and time.time() < deadline:
            time.sleep(0.2)
        assert left() == (0, 0, workflows - 1)
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, out + err


def test_a_bad_gc_policy_stops_the_worker_before_it_starts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    proc = run_cli("worker", "--agents", "demo", "--database-url", url, "--gc-every", "5", env=cli_env())
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "helix-dbos: --gc-every and --gc-policy go together: give both, or neither"
    ]
    assert not (tmp_path / "h.sqlite").exists()  # refused before anything was created


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ('{"keep_days": -1}', "bad --gc-policy (keep_days: Input should be greater than or equal to 0)"),
        ('{"keep_last_runs": 2, "colour": 1}', "bad --gc-policy (colour: Extra inputs are not permitted)"),
        ("{}", "--gc-policy sets no limit"),
        ("not json", "bad --gc-policy (policy: Invalid JSON"),
    ],
)
def test_gc_policy_errors_say_what_is_wrong(policy: str, message: str) -> None:
    with pytest.raises(CliError) as caught:
        background_policy(5, policy)
    assert caught.value.message.startswith(message) and caught.value.exit_code == 2


def test_gc_policy_with_agent_overrides() -> None:
    policy = background_policy(60, '{"keep_days": 30, "agents": {"support": {"keep_days": 90}}}')
    assert policy is not None and policy.rules_for("support").keep_days == 90
    assert background_policy(None, None) is None
