"""Schema migrations for the helix tables (alembic, run programmatically).

The alembic scripts ship inside the package (``helix_dbos/store/migrations``) so that an installed
helix-dbos can migrate a database without a source checkout; the repository's ``alembic.ini``
points at the same folder. The store never migrates on its own: :class:`SqlSessionStore` calls
:func:`check_migrated` and refuses to start on an out-of-date schema, because silently running DDL
from whichever worker starts first is how production databases get surprised.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from helix_dbos.errors import DatabaseNotMigratedError, HelixError
from helix_dbos.store.schema import SCHEMA_REVISION, VERSION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

# alembic is imported where a migration runs, not here: every store and stream checks the schema on
# start (one SELECT), and importing alembic for that cost every process (each CLI call, each
# worker) about 0.4-0.6 s of CPU (alembic brings mako and pygments).

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
"""The alembic script directory inside the installed package."""


def alembic_config(database_url: str | None = None) -> Config:
    """Build an alembic :class:`Config` for the helix migrations, without any ``.ini`` file.

    The URL goes into ``config.attributes`` rather than ``sqlalchemy.url`` because the ini-style
    options interpolate ``%``, which percent-encoded passwords contain.
    """
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if database_url is not None:
        config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the helix tables in ``database_url`` up to ``revision`` (idempotent).

    Safe to run from several processes at once on PostgreSQL (an advisory lock serializes them)
    and on SQLite (the migration runs in one ``BEGIN IMMEDIATE`` transaction).
    """
    from alembic import command

    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Revert the helix tables to ``revision`` (``"base"`` drops them all, with their data)."""
    from alembic import command

    command.downgrade(alembic_config(database_url), revision)


def head_revision() -> str:
    """Return the newest revision shipped with this package (``schema.SCHEMA_REVISION``)."""
    head = _scripts().get_current_head()
    if head is None:  # pragma: no cover - the package always ships a revision
        raise HelixError("helix-dbos ships no migrations")
    return head


def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def current_revision(engine: Engine) -> str | None:
    """Return the database's revision, or ``None`` when the helix tables were never created.

    Read from alembic's version table directly, as alembic's ``get_current_revision`` does (the
    migrations are linear: one row at most).
    """
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(VERSION_TABLE):
            return None
        rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:
        raise HelixError(f"{VERSION_TABLE} holds several revisions {sorted(rows)!r}; helix-dbos migrates linearly")
    return str(rows[0]) if rows else None


def display_url(url: str) -> str:
    """Return ``url`` with its password masked, fit for error messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database url>"


def check_migrated(engine: Engine, url: str) -> None:
    """Raise :class:`DatabaseNotMigratedError` unless the database is at ``SCHEMA_REVISION``.

    The error message carries the command to run (``helix-dbos db upgrade --database-url ...``),
    with the password masked. A database *newer* than this package is reported differently:
    upgrading the package, not the database, is the fix.
    """
    found = current_revision(engine)
    if found == SCHEMA_REVISION:
        return
    shown = display_url(url)
    if found is None:
        raise DatabaseNotMigratedError(shown, "the helix tables do not exist")
    known = {script.revision for script in _scripts().walk_revisions()}
    if found not in known:
        raise HelixError(
            f"The helix tables in {shown} are at revision {found!r}, which is newer than this "
            f"version of helix-dbos knows (it expects {SCHEMA_REVISION!r}); upgrade helix-dbos",
            code="framework_internal_error",
            retryable=False,
        )
    raise DatabaseNotMigratedError(shown, f"at revision {found!r}, expected {SCHEMA_REVISION!r}")
