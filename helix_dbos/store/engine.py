"""Engines and transactions: how every helix-dbos table is reached, on PostgreSQL and on SQLite.

The session store, the pending-call store, the worker registry, the durable stream and the
migrations all open connections the same way, so that one place decides how SQLite serialises
writers (``BEGIN IMMEDIATE``), how PostgreSQL survives a restart (see below), and how JSON is
encoded (the codec that escapes what PostgreSQL refuses).

PostgreSQL restarts: pooled connections are *not* pinged on checkout (``pool_pre_ping`` would cost
one extra round trip, and one extra transaction on the server, per store call: about a third of
the transactions of a run). A connection that went stale in a restart fails its first statement
instead; SQLAlchemy recognises the disconnect, invalidates that connection and every other pooled
connection that predates it, and raises a ``DBAPIError`` with ``connection_invalidated`` set, which
``helix_dbos.store.retry`` classifies as transient: every store and stream operation runs under that
retry, so the whole transaction runs again on a fresh connection. One failed statement per pool
per restart replaces one ping per call. The hot path's single statements, which go to psycopg
without SQLAlchemy's execution layer (:mod:`helix_dbos.store.alone`), do the same on a disconnect.

PostgreSQL pool: :data:`POSTGRES_POOL` keeps every connection it opens, up to 15, instead of
SQLAlchemy's default of 5 kept and 10 more opened and closed again. Under load (200 runs in one
process) the default pool opened about one connection per run: each a new server process, its
catalog caches cold and psycopg's prepared statements gone, about a quarter of PostgreSQL's CPU
per run. The most connections a process holds is the same 15 either way. The pool hands out the
connection returned last (``pool_use_lifo``), not the one idle longest: at less than full load the
same few server processes do the work, their prepared statements made and their caches warm, and
the rest stay idle.

PostgreSQL plans (:data:`POSTGRES_SESSION_SETTINGS`): every connection asks for generic plans of
prepared statements (``plan_cache_mode = force_generic_plan``). psycopg prepares a statement once
a connection has run it five times; PostgreSQL then still plans it afresh on each execution
whenever it estimates a plan for the given values cheaper, which it did for the step commit about
two executions in three, at about half a millisecond of server CPU each (``pg_stat_statements``
with ``track_planning``). The store's statements look rows up by key, so the values never change
the right plan. It is set by a statement on each new connection rather than as a startup option,
which connection poolers such as PgBouncer refuse.

SQLite notes: WAL mode and a busy timeout are set on every connection, and pysqlite's own
transaction handling is switched off so that the store can emit ``BEGIN`` / ``BEGIN IMMEDIATE``
itself (the SQLAlchemy-documented recipe). Use a file URL; ``:memory:`` databases are per
connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import make_url

from helix_dbos._clock import now_ms  # re-exported: its home was here
from helix_dbos.errors import HelixError
from helix_dbos.store import codec
from helix_dbos.store.dialect import SqlDialect
from helix_dbos.store.postgres import POSTGRES
from helix_dbos.store.sqlite import SQLITE

__all__ = [
    "POSTGRES_POOL",
    "POSTGRES_SESSION_SETTINGS",
    "SQLITE_BUSY_TIMEOUT_MS",
    "autocommit",
    "begin_read",
    "begin_write",
    "create_engine_for",
    "dialect_for",
    "now_ms",
    "to_sqlalchemy_url",
]

SQLITE_BUSY_TIMEOUT_MS: Final = 30_000
"""How long a SQLite writer waits for the write lock before failing with "database is locked"."""

_WRITE_OPTION: Final = "helix_write"

POSTGRES_POOL: Final = {"pool_size": 15, "max_overflow": 0, "pool_use_lifo": True}
"""The pool of a PostgreSQL engine made here (see the module docstring); ``engine_kwargs`` override it."""

POSTGRES_SESSION_SETTINGS: Final = {"plan_cache_mode": "force_generic_plan"}
"""Set on every new PostgreSQL connection of an engine made here (see the module docstring)."""


def to_sqlalchemy_url(url: str) -> str:
    """Normalise a database URL for SQLAlchemy: ``postgresql://`` / ``postgres://`` use psycopg 3.

    Other URLs (``sqlite:///path``, explicit ``postgresql+driver://``) pass through unchanged.
    """
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _json_dumps(value: Any) -> str:
    # pydantic-core serialises what json.dumps cannot (datetimes, models, UUIDs) and is faster;
    # the codec escapes what PostgreSQL refuses (NUL, lone surrogates), reversibly.
    return codec.dumps(value)


def create_engine_for(url: str, **engine_kwargs: Any) -> Engine:
    """Create a SQLAlchemy engine configured the way the store needs it.

    PostgreSQL goes through psycopg 3, without ``pool_pre_ping`` (see the module docstring). SQLite gets
    ``check_same_thread=False`` (the runtime calls the store from several threads), WAL, a busy
    timeout, and explicit ``BEGIN`` / ``BEGIN IMMEDIATE`` transactions (see the module docstring).
    PostgreSQL's pool keeps up to 15 connections (:data:`POSTGRES_POOL`). ``engine_kwargs`` override
    the defaults (``pool_size=...`` for more concurrent database work in one process).
    """
    sa_url = to_sqlalchemy_url(url)
    kwargs: dict[str, Any] = {"json_serializer": _json_dumps, "json_deserializer": codec.loads}
    backend = make_url(sa_url).get_backend_name()
    if backend == "postgresql":
        kwargs.update(POSTGRES_POOL)
    if backend == "sqlite":
        kwargs["connect_args"] = {"check_same_thread": False}
        database = make_url(sa_url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).parent.mkdir(parents=True, exist_ok=True)  # the embedded default lives in .helix/
    kwargs.update(engine_kwargs)
    engine = sa.create_engine(sa_url, **kwargs)
    if backend == "sqlite":
        _install_sqlite_events(engine)
    if backend == "postgresql":
        _install_postgres_events(engine)
    return engine


def dialect_for(engine: Engine | Connection) -> SqlDialect:
    """The dialect object for ``engine``'s backend (``helix_dbos.store.dialect``).

    Raises ``HelixError`` (``framework_not_supported``) for a backend other than PostgreSQL or SQLite.
    """
    name = engine.dialect.name
    if name == "postgresql":
        return POSTGRES
    if name == "sqlite":
        return SQLITE
    raise HelixError(f"helix-dbos supports PostgreSQL and SQLite, not {name!r}", code="framework_not_supported")


def _install_postgres_events(engine: Engine) -> None:
    settings = "; ".join(f"SET {name} = {value}" for name, value in POSTGRES_SESSION_SETTINGS.items())

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(settings)
        # Committed: the pool rolls a connection back when it returns, which would undo a bare SET.
        dbapi_connection.commit()


def _install_sqlite_events(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to the "begin" listener below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # A deferred transaction that reads and then writes can fail at once with SQLITE_BUSY
        # (the busy timeout does not apply to a lock upgrade); IMMEDIATE takes the write lock up
        # front, waiting for it under the busy timeout instead.
        immediate = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextmanager
def begin_write(engine: Engine) -> Iterator[Connection]:
    """Yield a connection inside a write transaction (``BEGIN IMMEDIATE`` on SQLite)."""
    with engine.connect() as conn:
        conn.execution_options(**{_WRITE_OPTION: True})
        with conn.begin():
            yield conn


@contextmanager
def begin_read(engine: Engine) -> Iterator[Connection]:
    """Yield a connection for reads: inside a transaction on SQLite (a plain ``BEGIN``, one snapshot).

    On PostgreSQL the connection is in autocommit mode: the store's transactions are READ
    COMMITTED, where each statement takes its own snapshot whether a transaction surrounds it or
    not, so ``BEGIN`` and ``COMMIT`` would only cost two round trips per read (the reads that need
    two statements to agree bound the second by the first, as ``load_state`` does).
    """
    if engine.dialect.name == "postgresql":
        with autocommit(engine) as conn:
            yield conn
        return
    with engine.connect() as conn, conn.begin():
        yield conn


@contextmanager
def autocommit(engine: Engine) -> Iterator[Connection]:
    """Yield a PostgreSQL connection outside any transaction: each statement commits on its own.

    A single statement is atomic in PostgreSQL without ``BEGIN`` and ``COMMIT``, which psycopg
    would send as two round trips of their own. For reads, and for writes that are one statement
    whatever happens (a step commit's fast path, ``helix_dbos.store.postgres``). Not for SQLite,
    whose writers must take the write lock with ``BEGIN IMMEDIATE`` (see ``begin_write``).
    """
    if engine.dialect.name != "postgresql":
        raise ValueError(f"autocommit connections are for PostgreSQL, not {engine.dialect.name!r}")
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")  # reset when the connection goes back
        yield conn
