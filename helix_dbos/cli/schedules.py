"""``helix-dbos schedules create|list|show|pause|resume|delete|backfill|fires``: agent schedules from the shell.

The commands talk to DBOS's system database through a ``DBOSClient`` (no launch, no agents
loaded), so they work beside running workers: a worker picks a change up within about a second.
``create`` cannot check that a worker serves the agent it names (the CLI loads no agents); a fire
of an agent no worker serves is recorded as failed with ``state_agent_not_found`` (``fires`` shows
it). The schedule rules (ids, missed fires, pause) are :mod:`helix_dbos.runtime.schedules`'.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from helix_dbos.cli.common import DatabaseUrl, JsonOutput, app, console, existing_url, friendly, new_app, print_json
from helix_dbos.cli.inputs import CliError

if TYPE_CHECKING:
    from helix_dbos.runtime.schedules import ScheduleBook, ScheduleInfo

__all__ = ["schedules_app"]

schedules_app = new_app(
    "Agent schedules: cron fires that start an agent run (create, pause, resume, backfill; list their fires)."
)
app.add_typer(schedules_app, name="schedules")

Name = Annotated[str, typer.Argument(help="The schedule's name.")]
_LIST_HINT = "helix-dbos schedules list shows the schedules"


@contextmanager
def _book(database_url: str | None) -> Iterator[ScheduleBook]:
    """The schedules of the database's DBOS application, through a client (one line when it is not there)."""
    from dbos import DBOSClient

    from helix_dbos.errors import ScheduleNotFoundError
    from helix_dbos.runtime.launch import dbos_system_database_url
    from helix_dbos.runtime.schedules import ScheduleBook

    url = existing_url(database_url)
    try:
        client = DBOSClient(system_database_url=dbos_system_database_url(url), application_name="helix-dbos")
    except Exception as exc:
        raise CliError(
            f"cannot open DBOS's system database ({type(exc).__name__}): start a worker on this database once "
            "(helix-dbos worker or serve), which creates it"
        ) from None
    try:
        yield ScheduleBook(client)
    except ScheduleNotFoundError as exc:
        raise CliError(f"{exc.message}: {_LIST_HINT}") from None
    finally:
        client.destroy()


def _when(option: str, text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"{option} is not an ISO 8601 time (e.g. 2026-11-27T05:00:00Z): {text!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _show(info: ScheduleInfo, as_json: bool) -> None:
    if as_json:
        print_json(info.model_dump(mode="json"))
        return
    s = info.schedule
    target = f"session {s.session_id}" if s.session_id else "a new session per fire"
    console.print(
        f"{s.name}  {info.status}  cron {s.cron!r}{f' ({s.timezone})' if s.timezone else ''}  agent {s.agent}  "
        f"{target}  missed fires: {s.missed_fires}  last fire: {info.last_fired_at or '-'}",
        markup=False,
        highlight=False,
    )


@schedules_app.command("create")
@friendly
def create(
    name: Name,
    agent: Annotated[str, typer.Option("--agent", help="The agent each fire runs (a worker must serve it).")],
    cron: Annotated[str, typer.Option("--cron", help="5 fields, or 6 with seconds first ('*/10 * * * * *').")],
    message: Annotated[str, typer.Option("--message", help="The user message each fire's run starts with.")],
    session: Annotated[
        str | None, typer.Option("--session", metavar="SESSION_ID", help="Continue this session at every fire.")
    ] = None,
    state: Annotated[
        str | None, typer.Option("--state", metavar="JSON", help="Custom state for each new session.")
    ] = None,
    timezone: Annotated[
        str | None, typer.Option("--timezone", help="IANA zone the cron is read in (default UTC).")
    ] = None,
    skip_missed: Annotated[
        bool, typer.Option("--skip-missed", help="Drop fire times missed while no worker ran (default: run each).")
    ] = False,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    database_url: DatabaseUrl = None,
    as_json: JsonOutput = False,
) -> None:
    """Create a cron schedule that starts an agent run at each fire time."""
    from pydantic import ValidationError

    from helix_dbos.runtime.schedules import AgentSchedule

    parsed_state: Any = None
    if state is not None:
        try:
            parsed_state = json.loads(state)
        except ValueError as exc:
            raise CliError(f"--state is not JSON: {exc}") from None
    try:
        spec = AgentSchedule(
            name=name,
            agent=agent,
            cron=cron,
            message=message,
            session_id=session,
            state=parsed_state,
            timezone=timezone,
            missed_fires="skip" if skip_missed else "run_each",
            enabled=not paused,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        hint = " (a name: letters, digits, '_', '.', '-'; at most 100)" if where == "name" else ""
        raise CliError(f"invalid {where}: {first['msg']}{hint}") from None
    with _book(database_url) as book:
        _show(book.create(spec), as_json)


@schedules_app.command("list")
@friendly
def list_schedules(database_url: DatabaseUrl = None, as_json: JsonOutput = False) -> None:
    """List the agent schedules."""
    with _book(database_url) as book:
        found = book.list()
    if as_json:
        print_json([info.model_dump(mode="json") for info in found])
        return
    if not found:
        console.print("no schedules", markup=False)
    for info in found:
        _show(info, False)


@schedules_app.command("show")
@friendly
def show(name: Name, database_url: DatabaseUrl = None, as_json: JsonOutput = False) -> None:
    """Show one schedule."""
    with _book(database_url) as book:
        _show(book.get(name), as_json)


@schedules_app.command("pause")
@friendly
def pause(name: Name, database_url: DatabaseUrl = None, as_json: JsonOutput = False) -> None:
    """Stop firing (within about a second); fire times until a resume are not run."""
    with _book(database_url) as book:
        _show(book.pause(name), as_json)


@schedules_app.command("resume")
@friendly
def resume(name: Name, database_url: DatabaseUrl = None, as_json: JsonOutput = False) -> None:
    """Fire again from the next fire time (the paused window is not caught up: backfill it)."""
    with _book(database_url) as book:
        _show(book.resume(name), as_json)


@schedules_app.command("delete")
@friendly
def delete(name: Name, database_url: DatabaseUrl = None) -> None:
    """Delete a schedule (its runs and sessions stay)."""
    with _book(database_url) as book:
        book.delete(name)
    console.print(f"deleted schedule {name}", markup=False, highlight=False)


@schedules_app.command("backfill")
@friendly
def backfill(
    name: Name,
    start: Annotated[str, typer.Option("--start", metavar="ISO_TIME", help="Window start (exclusive); UTC default.")],
    end: Annotated[
        str | None, typer.Option("--end", metavar="ISO_TIME", help="Window end (exclusive); default now.")
    ] = None,
    database_url: DatabaseUrl = None,
    as_json: JsonOutput = False,
) -> None:
    """Run each fire time of a past window that has not fired, once (a second backfill adds nothing)."""
    window = (_when("--start", start), _when("--end", end))
    with _book(database_url) as book:
        result = book.backfill(name, *window)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    console.print(
        f"backfilled {name}: {len(result.enqueued)} fires enqueued, {len(result.already_fired)} had fired already",
        markup=False,
        highlight=False,
    )


@schedules_app.command("fires")
@friendly
def fires(
    name: Name,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many, newest first.")] = 20,
    database_url: DatabaseUrl = None,
    as_json: JsonOutput = False,
) -> None:
    """List a schedule's latest fires and what each did (the run it started, or why not)."""
    with _book(database_url) as book:
        found = book.fires(name, limit=limit)
    if as_json:
        print_json([f.model_dump(mode="json") for f in found])
        return
    for fire in found:
        outcome = fire.outcome
        what = (
            "-"
            if outcome is None
            else f"{outcome.status} {outcome.run_id or ''}{f' ({outcome.code})' if outcome.code else ''}"
        )
        console.print(f"{fire.fire_time}  {fire.workflow_status}  {what}", markup=False, highlight=False)
