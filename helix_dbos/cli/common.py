"""What every command shares: the Typer apps, the common options, and one-line failures.

Every command takes ``--database-url`` (default: ``HELIX_DATABASE_URL``, else the embedded SQLite
files under ``.helix/``), so switching from the embedded default to PostgreSQL is one setting.
Options that have a ``HELIX_*`` variable take their default from :func:`cli_settings` (the
environment, read by :meth:`HelixSettings.from_env <helix_dbos.settings.HelixSettings.from_env>`
and nowhere else), not from Click's ``envvar``: a flag given wins, then the variable, then the default.
Foreseeable failures (a bad URL or ``--agents``, a database that is missing or unreachable, an
unknown session) are one line on stderr and a non-zero exit code (:mod:`helix_dbos.cli.inputs`).

Help is click's plain layout (option, then its help wrapped beside it), not rich's boxed table:
at 80 columns rich gave each column of a 7-column table its share and cut option names to fit
(``--allow-unauthenti…``), where click wraps the help text and never cuts a name. Docstrings and
option help hold no reStructuredText or rich markup, which plain help would print as it stands.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from typer.core import TyperArgument, TyperCommand, TyperOption

from helix_dbos._version import __version__
from helix_dbos.cli.inputs import CliError, check_database_url, explain

if TYPE_CHECKING:
    from helix_dbos.runtime.queues import RunQueue
    from helix_dbos.settings import HelixSettings
    from helix_dbos.store.sessions import SqlSessionStore

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
"""``-h`` as well as ``--help`` on every command (sub-apps inherit a parent's context settings)."""


class HelpCommand(TyperCommand):
    """A command whose help reads well in an 80-column terminal.

    - A docstring's paragraphs are joined into lines, and its first paragraph is the command's line
      in its group's list whole, wrapped rather than cut (``Run the demo agent end to end and...``).
    - The usage line names arguments as click does (``SESSION_ID``, ``[NAME]``), not ``{session_id}``.
    - A flag shows no type (``<bool>``); an option that takes a value names it (``--database-url URL``,
      ``--limit N``) rather than its Python type (``<str>``, ``<int range>``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.help:
            self.help = unwrap(self.help)
            if not self.short_help:
                self.short_help = self.help.split("\n\n", 1)[0]

    # ctx is click's Context, which typer vendors privately (typer.Context is a subclass of it)
    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            if param.metavar is None and isinstance(param, TyperOption | TyperArgument):
                param.metavar = _metavar(param, ctx)
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = (param.metavar or param.name or "").upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


def _metavar(param: TyperOption | TyperArgument, ctx: Any) -> str:
    """What an option's value or an argument is called in help when the code names none."""
    if isinstance(param, TyperOption) and param.is_flag:
        return ""  # a flag takes no value: no "<bool>" after its name
    kind = param.display_type(ctx)  # "<int range>", "<list[str]>"
    if kind.startswith("<int"):
        return "N"
    if kind.startswith("<float"):
        return "NUMBER"
    return (param.name or "value").upper()


class _App(typer.Typer):
    """A Typer app whose commands are :class:`HelpCommand` unless they say otherwise."""

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[F], F]:
        kwargs.setdefault("cls", HelpCommand)
        return super().command(name, **kwargs)


def unwrap(text: str) -> str:
    """``text`` (a docstring) with each paragraph on one line, for the help to wrap to the terminal."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)


def new_app(help_text: str) -> typer.Typer:
    """A Typer app (or sub-app) with ``-h``, plain help, and no shell-completion options."""
    return _App(
        help=help_text,
        short_help=help_text,
        no_args_is_help=True,
        add_completion=False,
        context_settings=CONTEXT_SETTINGS,
        rich_markup_mode=None,
    )


app = new_app("helix-dbos: durable AI agents on DBOS.")
db_app = new_app("Database schema management.")
sessions_app = new_app("Inspect sessions: list them, show one (runs, step timeline, usage, transcript).")
app.add_typer(db_app, name="db")
app.add_typer(sessions_app, name="sessions")
console = Console(soft_wrap=True)
"""Soft-wrapped: long lines (ids, JSON, messages) are left whole for the terminal to wrap, never folded."""


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
    typer.Option(
        "--database-url",
        metavar="URL",
        help="SQLAlchemy URL (PostgreSQL or SQLite). Default: HELIX_DATABASE_URL, else sqlite:///.helix/helix.sqlite.",
    ),
]

_QUEUE_FORMAT = (
    "NAME[:SETTINGS], SETTINGS being comma-separated concurrency=N, worker_concurrency=N, limit=N/SECONDS, poll=SECONDS"
)
# Words short enough to wrap: a format written as one 70-character word is cut at 80 columns.

QueueSpec = Annotated[
    str | None,
    typer.Option(
        "--queue",
        metavar="QUEUE",
        help=(
            f"Enqueue runs on this DBOS queue, for any worker: {_QUEUE_FORMAT}. "
            "Every server and worker of a deployment takes the same one. A worker runs at most "
            "200 queued runs at once unless worker_concurrency says otherwise (none: no cap). "
            "Default: HELIX_RUN_QUEUE."
        ),
    ),
]

QueueToShow = Annotated[
    str | None,
    typer.Option(
        "--queue",
        metavar="QUEUE",
        help=(
            f"The run queue to show, as serve and worker take it: {_QUEUE_FORMAT}. "
            "Default: HELIX_RUN_QUEUE, else helix-runs."
        ),
    ),
]

RateLimitSpecs = Annotated[
    list[str] | None,
    typer.Option(
        "--rate-limit",
        metavar="LIMIT",
        help=(
            "A provider limit every worker of the deployment shares (repeat for several): "
            "MATCH:requests=N/SECONDS,concurrency=N[,mode=exact|strict|rolling], MATCH being a prefix "
            "of model names (e.g. openai/:requests=500/60); mode defaults to exact (counted at each send). "
            "Default: HELIX_RATE_LIMITS."
        ),
    ),
]


def rate_limits_flag(specs: list[str] | None) -> str | None:
    """The ``--rate-limit`` flags as one ``rate_limits`` setting (``None``: not given, the environment's)."""
    return ";".join(specs) if specs else None


JsonOutput = Annotated[bool, typer.Option("--json", help="Print JSON (stable keys) instead of a table.")]

AGENTS_HELP = "module:attribute naming your agents (an AgentConfig or a list), or demo."
AGENTS_METAVAR = "MODULE:ATTR"


def cli_settings(**flags: Any) -> HelixSettings:
    """The environment's settings (:meth:`HelixSettings.from_env`) with the flags given on top.

    ``flags`` are settings fields; one that is ``None`` (not given) leaves the environment's value.
    A variable that is not valid is one line and exit code 2.
    """
    from helix_dbos.errors import HelixError
    from helix_dbos.settings import HelixSettings

    try:
        return HelixSettings.from_env().override(**flags)
    except HelixError as exc:
        raise CliError(exc.message, exit_code=2) from None


def parse_queue(spec: str | None) -> RunQueue | None:
    """The run queue ``--queue`` (else ``HELIX_RUN_QUEUE``) names, or ``None``; a bad spec is one line and exit 2."""
    from helix_dbos.runtime.queues import RunQueue

    spec = spec or cli_settings().run_queue
    if spec is None:
        return None
    try:
        return RunQueue.parse(spec)
    except ValueError as exc:
        raise CliError(f"bad --queue {spec!r}: {exc}", exit_code=2) from None


def resolve_url(database_url: str | None) -> str:
    """The database URL to use (the option, the environment, else the embedded default), checked."""
    return check_database_url(cli_settings(database_url=database_url).database_url)


def shown_url(url: str) -> str:
    """``url`` with its password masked, for printing."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def existing_url(database_url: str | None) -> str:
    """:func:`resolve_url`, for a command that reads: a SQLite file that is not there is one line.

    Opening it would create it (SQLite makes the file it is asked to open), and the store would then
    advise ``db upgrade``, which makes an empty database: the advice for a command run in the wrong
    directory, or without the ``--database-url`` the agents use. Commands that write (``demo``,
    ``serve``, ``worker``, ``db upgrade``) use :func:`resolve_url` and create the database.
    """
    url = resolve_url(database_url)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise CliError(
            f"no helix-dbos database at {shown_url(url)}: run this in the directory where the agents run, "
            "or pass --database-url (or set HELIX_DATABASE_URL)"
        )
    return url


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names (relative to the current directory), or ``None`` (PostgreSQL, in memory)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def open_store(database_url: str | None) -> SqlSessionStore:
    """The session store at ``database_url``, which must exist (:func:`existing_url`) and be migrated."""
    from helix_dbos.store import SqlSessionStore

    return SqlSessionStore(existing_url(database_url), retry=cli_settings().retry_policy)


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


def fits(table: Table) -> bool:
    """Whether ``table`` at its natural width (nothing cut) fits the terminal."""
    return Measurement.get(console, console.options.update_width(100_000), table).maximum <= console.width


Wide = Annotated[
    bool,
    typer.Option("--wide", help="A table row per item at its full width, even wider than the terminal."),
]


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
    "AGENTS_METAVAR",
    "CONTEXT_SETTINGS",
    "DatabaseUrl",
    "HelpCommand",
    "JsonOutput",
    "QueueSpec",
    "QueueToShow",
    "Wide",
    "app",
    "cli_settings",
    "compact_json",
    "console",
    "db_app",
    "existing_url",
    "fits",
    "friendly",
    "new_app",
    "one_line_errors",
    "open_store",
    "parse_queue",
    "print_json",
    "print_table",
    "resolve_url",
    "sessions_app",
    "shown_url",
    "sqlite_path",
    "unwrap",
]
