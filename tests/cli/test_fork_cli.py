"""``helix-dbos fork SESSION [--checkpoint ID] [--new-session ID]`` as a real process on PostgreSQL."""

from __future__ import annotations

import json

import pytest

from helix_dbos.store import SqlSessionStore
from tests.cli.conftest import run_cli

pytestmark = pytest.mark.usefixtures("cli_sessions")


def _checkpoint(url: str, session_id: str, step: int) -> str:
    with SqlSessionStore(url) as store:
        return next(c.id for c in store.list_checkpoints(session_id).items if c.step_count == step)


def test_fork_at_a_checkpoint_then_repeat_it(cli_sessions: str) -> None:
    step_1 = _checkpoint(cli_sessions, "cli-done", 1)
    with SqlSessionStore(cli_sessions) as store:
        before = store.load_state("cli-done")
    args = ["fork", "cli-done", "--checkpoint", step_1, "--new-session", "cli-fork", "--database-url", cli_sessions]
    made = run_cli(*args)
    assert made.returncode == 0, made.stdout + made.stderr
    expected = f"forked: session cli-fork from session cli-done at checkpoint {step_1}"
    assert made.stdout.startswith(expected), made.stdout
    again = run_cli(*args, "--json")
    fork = json.loads(again.stdout)
    assert fork["created"] is False and fork["session_id"] == "cli-fork" and fork["checkpoint_id"] == step_1
    assert (fork["status"], fork["step_count"], fork["message_count"]) == ("completed", 1, 3)
    shown = json.loads(run_cli("sessions", "show", "cli-fork", "--json", "--database-url", cli_sessions).stdout)
    assert shown["forked_from"]["session_id"] == "cli-done" and shown["forked_from"]["checkpoint_id"] == step_1
    assert shown["runs"] == [] and shown["message_count"] == 3
    with SqlSessionStore(cli_sessions) as store:
        assert store.load_state("cli-done") == before


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["cli-done", "--checkpoint", "cpv1-cli-done-s9-t1-abc"],
            "helix-dbos: Checkpoint 'cpv1-cli-done-s9-t1-abc' does not exist in session 'cli-done': "
            "helix-dbos sessions show cli-done lists its checkpoints",
        ),
        (
            ["cli-waiting"],
            "helix-dbos: Session 'cli-waiting' already has a run in flight (status 'active'); "
            "name the checkpoint to fork from (--checkpoint), or wait for it to finish",
        ),
        (
            ["cli-done", "--new-session", "cli-waiting"],
            "helix-dbos: Cannot fork into session 'cli-waiting': that session exists and is not a fork of this "
            "session at this checkpoint",
        ),
    ],
)
def test_a_fork_that_cannot_be_made_is_one_line(cli_sessions: str, args: list[str], line: str) -> None:
    proc = run_cli("fork", *args, "--database-url", cli_sessions)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [line]


def test_a_session_with_a_run_in_flight_forks_from_a_named_checkpoint(cli_sessions: str) -> None:
    waiting = _checkpoint(cli_sessions, "cli-waiting", 1)
    proc = run_cli("fork", "cli-waiting", "--checkpoint", waiting, "--json", "--database-url", cli_sessions)
    assert proc.returncode == 0, proc.stderr
    fork = json.loads(proc.stdout)
    assert fork["created"] and fork["status"] == "completed" and fork["message_count"] == 3  # + the closing result
