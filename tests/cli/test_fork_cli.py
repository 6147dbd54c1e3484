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
            ["cli-done", "--state", "{}", "--state-patch", "{}"],
            "helix-dbos: Cannot edit the fork: give state= (a replacement) or state_patch= (a merge patch), not both",
        ),
        (["cli-done", "--state-patch", "[1]"], "helix-dbos: --state-patch must be a JSON object"),
        (["cli-done", "--append"], "helix-dbos: --append adds --message: give the message too"),
        (
            ["cli-waiting"],
            "helix-dbos: Session 'cli-waiting' already has a run in flight (status 'active'); "
            "name the checkpoint to fork from (--checkpoint), or wait for it to finish",
        ),
        (
            ["cli-done", "--new-session", "cli-waiting"],
            "helix-dbos: Cannot fork into session 'cli-waiting': that session exists and is not this fork "
            "(source, checkpoint, edits)",
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


def test_history_then_a_fork_with_an_edited_input_and_state(cli_sessions: str) -> None:
    with SqlSessionStore(cli_sessions) as store:
        before = store.get_messages("cli-done", limit=100).messages
    listed = run_cli("sessions", "history", "cli-done", "--json", "--database-url", cli_sessions)
    assert listed.returncode == 0, listed.stderr
    history = json.loads(listed.stdout)
    assert history["total"] == len(history["checkpoints"]) >= 2
    step_1 = next(c for c in history["checkpoints"] if c["step_count"] == 1)
    assert step_1["message_count"] == 3 and step_1["run_id"] and step_1["time"].endswith("Z")

    args = ["fork", "cli-done", "--checkpoint", step_1["id"], "--new-session", "cli-tt", "--json"]
    edits = ["--message", "Edited question", "--state-patch", '{"edited": true}']
    made = run_cli(*args, *edits, "--database-url", cli_sessions)
    assert made.returncode == 0, made.stdout + made.stderr
    fork = json.loads(made.stdout)
    assert fork["forked_from"]["edits"] == {"message": "Edited question", "state_patch": {"edited": True}}
    with SqlSessionStore(cli_sessions) as store:
        messages = store.get_messages("cli-tt", limit=100).messages
        state = store.load_state("cli-tt")
        assert [m.role for m in messages] == ["user"] and messages[0].content == "Edited question"  # type: ignore[union-attr]
        assert state is not None and state.custom_state["edited"] is True
        assert store.get_messages("cli-done", limit=100).messages == before
