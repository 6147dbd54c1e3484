"""The ``helix-dbos`` command line, one module per area.

| Module | Commands |
| --- | --- |
| ``common.py`` | the Typer apps, shared options, ``--version``, one-line errors, tables never cut |
| ``inputs.py`` | checking a database URL and ``--agents``; foreseeable failures as one line with a hint |
| ``model_check.py`` | agents' model strings, LiteLLM and API keys checked before anything is written |
| ``render.py`` | times, durations, statuses and stream chunks as a person reads them (pure) |
| ``db.py`` | ``db upgrade`` |
| ``demo_run.py`` | ``demo`` (and the stream watching recovery shares) |
| ``workers.py`` | ``worker``, ``recover``, ``queue-status`` |
| ``serve.py`` | ``serve`` |
| ``sessions.py`` | ``sessions list``, ``sessions show`` |
| ``timeline.py`` | a session's runs and steps with durations, tokens and cost (pure) |
| ``tail.py`` | ``tail``: follow a session's stream live |
| ``fork.py`` | ``fork``: branch a session from a checkpoint |
| ``schedules.py`` | ``schedules create|list|show|pause|resume|delete|backfill|fires`` |
| ``gc.py`` | ``gc``: delete what is past a retention policy |

Importing this package registers every command on :data:`app`.
"""

from __future__ import annotations

from helix_dbos.cli import db, demo_run, fork, gc, schedules, serve, sessions, tail, workers
from helix_dbos.cli.common import app

__all__ = ["app", "main"]

_COMMAND_MODULES = (demo_run, workers, serve, sessions, tail, fork, schedules, gc, db)
"""Imported for their side effect: each registers its commands on ``app``."""


def main() -> None:
    """Console-script entry point.

    The package logs nowhere by default (a ``NullHandler``); a command line is an application, so
    every command shows helix-dbos's warnings on stderr. ``serve`` and ``worker`` then replace this
    with their configured level and format.
    """
    from helix_dbos.observability.log_setup import configure_logging

    configure_logging("WARNING")
    app()


if __name__ == "__main__":
    main()
