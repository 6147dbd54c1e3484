"""Alembic environment for the helix tables.

Runs in three ways:

- programmatically from :func:`helix_dbos.store.migrate.upgrade` (the URL arrives in
  ``config.attributes["database_url"]``), which is what ``helix-dbos db upgrade`` does;
- with an open connection in ``config.attributes["connection"]`` (tests, embedding apps);
- from the ``alembic`` command with the repository's ``alembic.ini``, taking the URL from
  ``-x database_url=...``, then ``$HELIX_DATABASE_URL`` (through ``HelixSettings.from_env``), then
  ``sqlalchemy.url``.

The version table is ``helix_alembic_version`` so that an application's own alembic history in the
same database is never touched, and autogenerate only looks at ``helix_*`` tables. The migration
holds the dialect's migration lock (``SqlDialect.lock_migrations``: a transaction-scoped advisory
lock on PostgreSQL), so two processes upgrading at once serialize instead of both creating the tables.
"""

from __future__ import annotations

import logging.config
from typing import Any

from alembic import context
from sqlalchemy import Connection

from helix_dbos.store.engine import begin_write, create_engine_for, dialect_for, to_sqlalchemy_url
from helix_dbos.store.schema import TABLE_PREFIX, VERSION_TABLE, metadata

config = context.config


def _url_from_environment() -> str | None:
    """``HELIX_DATABASE_URL`` when it is set (not the embedded default: alembic's own URL comes next)."""
    from helix_dbos.settings import HelixSettings

    url = HelixSettings.from_env().database_url
    return None if url == HelixSettings().database_url else url


def _database_url() -> str:
    x_url = context.get_x_argument(as_dictionary=True).get("database_url")
    url = (
        x_url
        or config.attributes.get("database_url")
        or _url_from_environment()
        or config.get_main_option("sqlalchemy.url")
    )
    if not url:
        raise RuntimeError(
            "No database URL: pass -x database_url=..., set HELIX_DATABASE_URL, or set sqlalchemy.url in alembic.ini"
        )
    return to_sqlalchemy_url(url)


def _include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    # The database may be shared with an application: only ever compare (and so never drop)
    # helix tables.
    if type_ == "table":
        return name is not None and name.startswith(TABLE_PREFIX) and name != VERSION_TABLE
    return True


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_object=_include_object,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        dialect_for(connection).lock_migrations(connection)
        context.run_migrations()


def run_migrations_offline() -> None:
    """Emit the migration SQL instead of running it (``alembic upgrade head --sql``)."""
    context.configure(
        url=_database_url(),
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_object=_include_object,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Migrate over a given connection, or over a new one inside one write transaction."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    engine = create_engine_for(_database_url())
    try:
        # One explicit transaction around everything: alembic then treats it as external and runs
        # all revisions in it (SQLite included, where alembic would otherwise not use one).
        with begin_write(engine) as conn:
            _configure_and_run(conn)
    finally:
        engine.dispose()


if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)

if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
