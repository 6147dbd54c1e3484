"""``helix-dbos db upgrade``: create or upgrade the helix-dbos tables."""

from __future__ import annotations

from helix_dbos.cli.common import DatabaseUrl, console, db_app, friendly, resolve_url, shown_url

__all__ = ["db_upgrade"]


@db_app.command("upgrade")
@friendly
def db_upgrade(database_url: DatabaseUrl = None) -> None:
    """Create or upgrade the helix-dbos tables."""
    from helix_dbos.store.migrate import upgrade

    url = resolve_url(database_url)
    upgrade(url)
    console.print(f"[green]helix-dbos tables are up to date[/green] in {shown_url(url)}")
