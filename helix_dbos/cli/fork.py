"""``helix-dbos fork SESSION`` and ``helix-dbos sessions history SESSION``: time travel from the shell.

``sessions history`` lists a session's checkpoints (its state history: step, run, message count,
state summary, time); ``fork`` branches a new session from one, optionally with an edited input
(``--message``, replacing the checkpoint's last user message, or added with ``--append``) or custom
state (``--state`` replaces it, ``--state-patch`` is a JSON merge patch). The fork is idle: a
worker runs it after ``retry`` (``POST /v1/sessions/{id}/retry``, or ``executor.retry``), which
runs the model on the edited input. The rules (what a fork holds, its status, a run in flight on
the source, repeats, edits) are in :mod:`helix_dbos.runtime.forks`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from helix_dbos.cli.common import (
    DatabaseUrl,
    JsonOutput,
    app,
    cli_settings,
    console,
    existing_url,
    friendly,
    print_json,
    sessions_app,
)
from helix_dbos.cli.inputs import CliError
from helix_dbos.cli.render import iso_utc

__all__ = ["fork", "sessions_history"]


def _json_object(option: str, text: str | None) -> dict[str, Any] | None:
    """A JSON object given on the command line, or a one-line error naming the option."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{option} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(f"{option} must be a JSON object")
    return value


@app.command()
@friendly
def fork(
    session_id: Annotated[str, typer.Argument(help="The session to branch from (a sub-agent's or companion's too).")],
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            metavar="CHECKPOINT_ID",
            help="The checkpoint to branch at (sessions history lists them); default: the latest.",
        ),
    ] = None,
    new_session: Annotated[
        str | None,
        typer.Option(
            "--new-session",
            metavar="SESSION_ID",
            help="The fork's session id; a repeat with the same id and edits returns the same fork.",
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message",
            metavar="TEXT",
            help="Edited input: replaces the checkpoint's last user message and what followed it.",
        ),
    ] = None,
    append: Annotated[
        bool, typer.Option("--append", help="Add --message after the checkpoint instead of replacing.")
    ] = False,
    state: Annotated[
        str | None,
        typer.Option("--state", metavar="JSON", help="Edited custom state: a JSON object replacing it."),
    ] = None,
    state_patch: Annotated[
        str | None,
        typer.Option(
            "--state-patch", metavar="JSON", help="Edited custom state: a JSON merge patch (null deletes a key)."
        ),
    ] = None,
    database_url: DatabaseUrl = None,
    as_json: JsonOutput = False,
) -> None:
    """Branch a new session from a checkpoint of another, optionally edited; the original is not changed."""
    from helix_dbos.logger import std_logger
    from helix_dbos.orchestration.fork_edits import ForkEdits
    from helix_dbos.runtime.forks import fork_session
    from helix_dbos.runtime.streaming import RunStreams
    from helix_dbos.store import SqlSessionStore
    from helix_dbos.stream.sql import SqlStreamManager

    if append and message is None:
        raise CliError("--append adds --message: give the message too")
    edits = ForkEdits(
        message=message,
        message_mode="append" if append else "replace",
        state=_json_object("--state", state),
        state_patch=_json_object("--state-patch", state_patch),
    )
    url = existing_url(database_url)
    policy = cli_settings().retry_policy
    with SqlSessionStore(url, retry=policy) as store:
        manager = SqlStreamManager(store.engine, check_schema=False, retry=policy)
        try:
            streams = RunStreams(manager, std_logger("helix_dbos.cli"))
            result = fork_session(store, streams, session_id, checkpoint, new_session_id=new_session, edits=edits)
            streams.flush()
        finally:
            manager.close()
    session = result.session
    if as_json:
        print_json(
            {
                "session_id": session.session_id,
                "created": result.created,
                "source_session_id": result.source_session_id,
                "checkpoint_id": result.checkpoint_id,
                "fork_checkpoint_id": result.fork_checkpoint_id,
                "status": session.status,
                "step_count": session.step_count,
                "message_count": session.message_count,
                "forked_from": session.forked_from,
                "created_at": iso_utc(session.created_at),
                "created_at_ms": session.created_at,
            }
        )
        return
    verb = "forked" if result.created else "already forked (same request)"
    console.print(
        f"{verb}: session {session.session_id} from session {result.source_session_id} "
        f"at checkpoint {result.checkpoint_id} (step {session.step_count}, {session.message_count} messages); "
        f"status {session.status}",
        soft_wrap=True,
        markup=False,
        highlight=False,
    )


@sessions_app.command("history")
@friendly
def sessions_history(
    session_id: Annotated[str, typer.Argument(help="The session's id, as sessions list prints it.")],
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 50,
    database_url: DatabaseUrl = None,
    as_json: JsonOutput = False,
) -> None:
    """List a session's checkpoints, newest first: the points fork and retry take."""
    from helix_dbos.errors import SessionNotFoundError
    from helix_dbos.store import SqlSessionStore

    url = existing_url(database_url)
    with SqlSessionStore(url, retry=cli_settings().retry_policy) as store:
        if store.load_session(session_id) is None:
            raise SessionNotFoundError(session_id)
        page = store.list_checkpoints(session_id, limit=limit)
    if as_json:
        print_json(
            {
                "session_id": session_id,
                "total": page.total,
                "checkpoints": [{**c.model_dump(), "time": iso_utc(c.timestamp)} for c in page.items],
            }
        )
        return
    console.print(f"{page.total} checkpoints of session {session_id}, newest first", markup=False, highlight=False)
    for c in page.items:
        console.print(
            f"{c.id}  step {c.step_count}  {c.message_count} messages  {c.status}  {iso_utc(c.timestamp)}  "
            f"state {c.state_summary}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
