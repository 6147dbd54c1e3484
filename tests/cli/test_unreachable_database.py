"""A database never reached at start-up is most likely a wrong URL: say so at once, then wait quietly.

Before: ``demo`` (and ``worker``, ``serve``) on a wrong port waited 121.6 s printing 69 retry lines
(``database unavailable: connecting to the database failed (...); retrying in 1.4 s (attempt 9, ...)``);
only the last one named the bound and ``HELIX_DB_RETRY_SECONDS``. Now the first line comes at once
with the URL (password masked), the bound and the variable; the wait after it is quiet (a reminder
every 30 s); the last line is the one-line error. A database that was reached and drops later keeps
its warning per retry (``tests/durability``).
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest

from helix_dbos.errors import DatabaseUnavailableError
from helix_dbos.runtime.launch import wait_for_database
from helix_dbos.store.retry import RetryPolicy
from tests.cli_process import CliProcess, cli_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_start_up_names_the_url_at_once_then_waits_quietly(caplog: pytest.LogCaptureFixture) -> None:
    url = f"postgresql://helix:s3cret@127.0.0.1:{_free_port()}/helix"
    with caplog.at_level(logging.INFO), pytest.raises(DatabaseUnavailableError):
        wait_for_database(url, RetryPolicy(max_seconds=2.0))
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 1, lines  # one line, not one per attempt (about 10 in 2 s)
    (first,) = lines
    assert "helix:***@127.0.0.1" in first and "s3cret" not in first, first
    assert "HELIX_DB_RETRY_SECONDS" in first and "2 s" in first and "--database-url" in first, first


@pytest.mark.parametrize("command", [["worker", "--agents", "demo"], ["demo"]])
def test_a_wrong_port_is_one_line_at_once_and_one_line_at_the_end(command: list[str], tmp_path: Path) -> None:
    url = f"postgresql://helix:s3cret@127.0.0.1:{_free_port()}/helix"
    started = time.monotonic()
    proc = CliProcess(tmp_path, *command, "--database-url", url, env=cli_env(HELIX_DB_RETRY_SECONDS="4"))
    proc.wait_for("HELIX_DB_RETRY_SECONDS", timeout=30)
    first_after = time.monotonic() - started
    code = proc.wait(timeout=60)
    lines = [line for line in proc.output.splitlines() if line.strip() and "helix-dbos demo" not in line]
    assert code == 1, proc.output
    assert len(lines) == 2, proc.output  # the first line, the final error; not a line per attempt
    assert "s3cret" not in proc.output and "helix:***@127.0.0.1" in lines[0], lines
    assert lines[1].startswith("helix-dbos: ") and "4 s" in lines[1] and "--database-url" in lines[1], lines
    assert first_after < 15, first_after  # at once, not after the bound (process start-up included)
