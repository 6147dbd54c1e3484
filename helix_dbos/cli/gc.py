"""``helix-dbos gc``: delete the runs and sessions past a retention policy (``helix_dbos.retention``).

The policy comes from the flags (``--keep-days``, ``--keep-failed-days``, ``--keep-last``); at
least one is required. ``--dry-run`` prints what would go, per table, and deletes nothing. DBOS's
rows are deleted through a ``DBOSClient`` on the store's DBOS system database (the same PostgreSQL
database, or the ``-dbos`` sibling of a SQLite file); when that database is not there, DBOS rows
are left alone and the output says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from helix_dbos.cli.common import (
    DatabaseUrl,
    JsonOutput,
    app,
    console,
    existing_url,
    friendly,
    open_store,
    print_json,
    sqlite_path,
)
from helix_dbos.cli.inputs import CliError

if TYPE_CHECKING:
    from helix_dbos.retention import RetentionPolicy, RetentionSweeper

__all__ = ["GcEvery", "GcPolicy", "background_policy", "gc", "start_sweeper"]

GcEvery = Annotated[
    float | None,
    typer.Option(
        metavar="SECONDS", min=0.01, help="Also delete what is past --gc-policy every SECONDS (see helix-dbos gc)."
    ),
]
GcPolicy = Annotated[
    str | None,
    typer.Option(
        metavar="JSON",
        help="The retention policy of --gc-every as a JSON object: keep_days, keep_failed_days, keep_last_runs "
        "and per-agent overrides under agents (docs: Retention).",
    ),
]


def background_policy(every_seconds: float | None, policy_json: str | None) -> RetentionPolicy | None:
    """The policy of a worker's background collection (``None``: none), checked before anything starts."""
    from pydantic import ValidationError

    from helix_dbos.retention import RetentionPolicy

    if every_seconds is None and policy_json is None:
        return None
    if every_seconds is None or policy_json is None:
        raise CliError("--gc-every and --gc-policy go together: give both, or neither", exit_code=2)
    try:
        policy = RetentionPolicy.model_validate_json(policy_json)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'policy'}: {e['msg']}" for e in exc.errors())
        raise CliError(
            f'bad --gc-policy ({problems}): use JSON such as \'{{"keep_days": 30, "keep_last_runs": 5}}\'',
            exit_code=2,
        ) from None
    if policy.is_empty:
        raise CliError("--gc-policy sets no limit: give keep_days, keep_failed_days or keep_last_runs", exit_code=2)
    return policy


def start_sweeper(database_url: str, policy: RetentionPolicy, every_seconds: float) -> RetentionSweeper:
    """Start the background collection of a launched process (DBOS's rows through the launched ``DBOS``)."""
    from dbos import DBOS

    from helix_dbos.retention import DbosWorkflowRows, RetentionSweeper

    sweeper = RetentionSweeper(database_url, policy, DbosWorkflowRows(DBOS), every_seconds=every_seconds)
    sweeper.start()
    return sweeper


@app.command()
@friendly
def gc(
    database_url: DatabaseUrl = None,
    keep_days: Annotated[
        float | None, typer.Option(metavar="DAYS", min=0, help="Delete finished runs older than this.")
    ] = None,
    keep_failed_days: Annotated[
        float | None,
        typer.Option(metavar="DAYS", min=0, help="Delete failed runs older than this (instead of --keep-days)."),
    ] = None,
    keep_last: Annotated[
        int | None, typer.Option(metavar="K", min=1, help="Keep each session's last K runs; delete older ones.")
    ] = None,
    batch: Annotated[int, typer.Option(metavar="N", min=1, help="Rows per delete transaction.")] = 500,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be deleted; delete nothing.")] = False,
    as_json: JsonOutput = False,
) -> None:
    """Delete runs, sessions, stream chunks and DBOS workflows past a retention policy.

    Never touches a session with a run in flight, queued or parked, nor any session of a family
    (a parent, its sub-agents and companions) where one is. A session that lives on keeps its
    latest run and its whole transcript. Prints the rows deleted per table.
    """
    from helix_dbos.retention import DbosWorkflowRows, RetentionPolicy, collect_garbage
    from helix_dbos.store.engine import now_ms

    policy = RetentionPolicy(keep_days=keep_days, keep_failed_days=keep_failed_days, keep_last_runs=keep_last)
    if policy.is_empty:
        raise CliError(
            "gc needs a policy: give --keep-days, --keep-failed-days or --keep-last "
            "(add --dry-run to see what it would delete)",
            exit_code=2,
        )
    store = open_store(database_url)
    client = _dbos_client(existing_url(database_url))
    try:
        workflows = DbosWorkflowRows(client) if client is not None else None
        report = collect_garbage(store.engine, policy, workflows, now_ms=now_ms(), batch_size=batch, dry_run=dry_run)
    finally:
        if client is not None:
            client.destroy()
        store.close()
    if as_json:
        print_json(report.model_dump())
        return
    verb = "would delete" if dry_run else "deleted"
    table = Table("table", f"rows {verb}")
    for name, rows in report.deleted.items():
        table.add_row(name, str(rows))
    console.print(table)
    console.print(
        f"{verb}: {report.sessions_deleted} whole session(s), {report.runs_deleted} run(s) of sessions that live on; "
        f"left alone: {report.live_sessions_kept} live session(s), {report.skipped} changed or unfinished",
        soft_wrap=True,
    )
    if client is None:
        console.print("no DBOS system database next to this store: DBOS rows were not looked at")


def _dbos_client(store_url: str) -> Any:
    """A ``DBOSClient`` on the store's DBOS system database, or ``None`` when there is none."""
    from dbos import DBOSClient

    from helix_dbos.runtime.launch import dbos_system_database_url

    system_url = dbos_system_database_url(store_url)
    system_file = sqlite_path(system_url)
    if system_file is not None and not system_file.exists():
        return None
    return DBOSClient(system_database_url=system_url)
