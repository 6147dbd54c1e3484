"""What every command shares: the Typer apps, the common options, and one-line failures.

Every command takes ``--database-url`` (default: ``HELIX_DATABASE_URL``, else the embedded SQLite
files under ``.helix/``), so switching from the embedded default to PostgreSQL is one setting.
Foreseeable failures (a bad URL or ``--agents``, a database that is missing or unreachable, an
unknown session) are one line on stderr and a non-zero exit code (:mod:`helix_dbos.cli.inputs`).

Help text is plain: docstrings and option help hold no reStructuredText or rich markup, and square
brackets are escaped (:func:`plain_help`), because rich would print the first and swallow the second.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from helix_dbos._version import __version__
from helix_dbos.cli.inputs import CliError, check_database_url, explain

if TYPE_CHECKING:
    from helix_dbos.runtime.queues import RunQueue
    from helix_dbos.store.sessions import SqlSessionStore

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
"""``-h`` as well as ``--help`` on every command (sub-apps inherit a parent's context settings)."""


def new_app(help_text: str) -> typer.Typer:
    """A Typer app (or sub-app) with ``-h``, rich help, and no shell-completion options."""
    return typer.Typer(
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        context_settings=CONTEXT_SETTINGS,
        rich_markup_mode="rich",
    )


app = new_app("helix-dbos: durable AI agents on DBOS.")
db_app = new_app("Database schema management.")
sessions_app = new_app("Inspect sessions: list them, show one (runs, step timeline, usage, transcript).")
app.add_typer(db_app, name="db")
app.add_typer(sessions_app, name="sessions")
console = Console(soft_wrap=True)
"""Soft-wrapped: long lines (ids, JSON, messages) are left whole for the terminal to wrap, never folded."""


def plain_help(text: str) -> str:
    """``text`` with its square brackets escaped, so rich prints them instead of reading markup."""
    return text.replace("[", "\\[")


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"helix-dbos {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """helix-dbos: durable AI agents on DBOS."""


DatabaseUrl = Annotated[
    str | None,
    typer.Option("--database-url", envvar="HELIX_DATABASE_URL", help="SQLAlchemy URL (PostgreSQL or SQLite)."),
]

QueueSpec = Annotated[
    str | None,
    typer.Option(
        "--queue",
        envvar="HELIX_RUN_QUEUE",
        help=plain_help(
            "Enqueue runs on this DBOS queue, for any worker: NAME[:concurrency=N,worker_concurrency=N,"
            "limit=N/SECONDS,poll=SECONDS]. Every server and worker of a deployment takes the same one."
        ),
    ),
]

JsonOutput = Annotated[bool, typer.Option("--json", help="Print JSON (stable keys) instead of a table.")]

AGENTS_HELP = "module:attribute naming your agents (an AgentConfig or a list), or demo."


def parse_queue(spec: str | None) -> RunQueue | None:
    """The run queue ``--queue`` names, or ``None``; a bad spec is one line and exit code 2."""
    from helix_dbos.runtime.queues import RunQueue

    if spec is None:
        return None
    try:
        return RunQueue.parse(spec)
    except ValueError as exc:
        raise CliError(f"bad --queue {spec!r}: {exc}", exit_code=2) from None


def resolve_url(database_url: str | None) -> str:
    """The database URL to use (the option, the environment, else the embedded default), checked."""
    from helix_dbos.runtime.launch import default_database_url

    return check_database_url(database_url or default_database_url())


def shown_url(url: str) -> str:
    """``url`` with its password masked, for printing."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def open_store(database_url: str | None) -> SqlSessionStore:
    """The session store at ``database_url`` (checked to be migrated)."""
    from helix_dbos.store import SqlSessionStore

    return SqlSessionStore(resolve_url(database_url))


def print_table(table: Table) -> None:
    """Print ``table`` at its natural width, wider than the terminal if need be: a cell is never cut.

    Rich fits a table to the terminal by cutting cells (``session-d4…``); an id or a status cut
    short cannot be read or pasted, so the terminal's own line wrapping is the lesser evil.
    """
    natural = Measurement.get(console, console.options.update_width(100_000), table).maximum
    if natural <= console.width:
        console.print(table)
    else:  # a console's own width caps what it prints, so a wider one on the same output
        Console(width=natural, file=console.file, force_terminal=console.is_terminal).print(table)


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout, unstyled (so it pipes into ``jq``)."""
    typer.echo(json.dumps(value, ensure_ascii=False, indent=2))


def compact_json(value: Any) -> str:
    """``value`` as one line of JSON."""
    return json.dumps(value, ensure_ascii=False)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn a foreseeable failure into ``helix-dbos: <what and what to do>`` on stderr and an exit code."""
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:
        error = explain(exc)
        if error is None:
            raise
        typer.echo(f"helix-dbos: {error.message}", err=True)
        raise typer.Exit(error.exit_code) from None


def friendly(command: F) -> F:
    """Report the command's foreseeable failures as one line (see :func:`one_line_errors`)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_line_errors():
            return command(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


__all__ = [
    "AGENTS_HELP",
    "CONTEXT_SETTINGS",
    "DatabaseUrl",
    "JsonOutput",
    "QueueSpec",
    "app",
    "compact_json",
    "console",
    "db_app",
    "friendly",
    "new_app",
    "one_line_errors",
    "open_store",
    "parse_queue",
    "plain_help",
    "print_json",
    "print_table",
    "resolve_url",
    "sessions_app",
    "shown_url",
]
