"""``helix-dbos fork SESSION``: branch a new session from a checkpoint of another.

The fork is idle: continue it with a new message (``POST /v1/runs`` with its ``session_id``, or
``executor.execute``), or replay the step after the checkpoint (``retry``). The checkpoints of a
session are the ``checkpoint`` column of ``helix-dbos sessions show``. The rules (what a fork holds,
its status, a run in flight on the source, repeats) are in :mod:`helix_dbos.runtime.forks`.
"""

from __future__ import annotations

from typing import Annotated

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
)
from helix_dbos.cli.render import iso_utc

__all__ = ["fork"]


@app.command()
@friendly
def fork(
    session_id: Annotated[str, typer.Argument(help="The session to branch from.")],
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            metavar="CHECKPOINT_ID",
            help="The checkpoint to branch at (sessions show lists them); default: the latest.",
        ),
    ] = None,
    new_session: Annotated[
        str | None,
        typer.Option(
            "--new-session",
            metavar="SESSION_ID",
            help="The fork's session id; a repeat with the same id returns the same fork.",
        ),
    ] = None,
    database_url: DatabaseUrl = None,
    as_json: JsonOutput = False,
) -> None:
    """Branch a new session from a checkpoint of another; the original is not changed."""
    from helix_dbos.logger import std_logger
    from helix_dbos.runtime.forks import fork_session
    from helix_dbos.runtime.streaming import RunStreams
    from helix_dbos.store import SqlSessionStore
    from helix_dbos.stream.sql import SqlStreamManager

    url = existing_url(database_url)
    policy = cli_settings().retry_policy
    with SqlSessionStore(url, retry=policy) as store:
        manager = SqlStreamManager(store.engine, check_schema=False, retry=policy)
        try:
            streams = RunStreams(manager, std_logger("helix_dbos.cli"))
            result = fork_session(store, streams, session_id, checkpoint, new_session_id=new_session)
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
