"""A statement alone: one guarded, autocommitted statement on PostgreSQL, handed straight to psycopg.

The hottest writes of a run are single statements that apply whole or fail whole: every step
commit (:mod:`helix_dbos.store.postgres`, with the stream chunks riding in it), a stream's batch of
chunks and a run's closing chunks with its end (:mod:`helix_dbos.stream.sql.postgres`). Each
carries a guard column that divides by zero when the case is not the common one, so the caller
gets ``None`` and takes its transaction path; nothing was written.

Why straight to psycopg: SQLAlchemy's execution layer around such a statement (the ``Connection``
object, the isolation level set and reset, the compiled cache lookup, the result's metadata and
``Row``) cost about 150-250 microseconds of CPU a statement on this project's machine, against
about 120 for psycopg's own execution of the same text, and a run makes one per model call.
What is kept of SQLAlchemy is all that matters to the rest of the store:

- **its pool**: the connection is checked out of the engine's pool (``Engine.raw_connection``),
  with the pool's connect events (the session settings of :mod:`helix_dbos.store.engine`);
- **its statement text**: the statement is a ``sa.text`` whose bind parameters SQLAlchemy compiles
  to psycopg's ``%(name)s`` form, once per text;
- **its errors**: a driver error is raised as SQLAlchemy raises it (``sa.exc.DBAPIError.instance``:
  ``DataError``, ``IntegrityError``, ``OperationalError``, with ``connection_invalidated``), so the
  callers' handlers and :mod:`helix_dbos.store.retry`'s classification see what they always saw;
- **its reaction to a disconnect**: the broken connection is invalidated, and the pool's idle
  connections, which predate it and went stale in the same restart, are closed (``Pool.dispose``),
  as SQLAlchemy's own handling of a disconnect does;
- **its events**: an engine with a cursor listener (a tracer such as OpenTelemetry's SQLAlchemy
  instrumentation, or a test counting round trips) runs the statement through SQLAlchemy instead,
  so every statement stays visible to it. Both paths send the same text in the same round trips.

Only bind-parameter-free typing is supported: every parameter goes to psycopg as given (the
store's JSON is text from :mod:`helix_dbos.store.codec` already), and rows come back as tuples of
psycopg's values, untouched by SQLAlchemy's result types (a statement compiled with typed binds is
refused at compile time).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final, Literal, overload

import psycopg
import sqlalchemy as sa
from sqlalchemy import Engine
from sqlalchemy.dialects.postgresql import psycopg as sa_psycopg

__all__ = ["DIVISION_BY_ZERO", "run_alone"]

DIVISION_BY_ZERO: Final = "22012"
"""The SQLSTATE of a statement whose guard failed it: not the common case, and nothing was written."""

_DIALECT: Final = sa_psycopg.dialect()  # type: ignore[no-untyped-call]
"""Compiles statement texts to psycopg's parameter form (the same for every psycopg engine)."""

_CURSOR_EVENTS: Final = ("before_cursor_execute", "after_cursor_execute")


@functools.lru_cache(maxsize=256)
def _driver_text(text: str) -> str:
    """``text`` as psycopg takes it: ``:name`` binds as ``%(name)s``, literal ``%`` doubled."""
    compiled = sa.text(text).compile(dialect=_DIALECT)
    typed = [name for name, bind in compiled.binds.items() if not isinstance(bind.type, sa.types.NullType)]
    if typed:  # pragma: no cover - a programming error, caught by the tests of each statement
        raise ValueError(f"run_alone takes untyped bind parameters only, not {typed}")
    return str(compiled)


def _traced(engine: Engine) -> bool:
    """Whether something listens to the engine's cursor executions (then SQLAlchemy runs the statement)."""
    dispatch = engine.dispatch
    return any(bool(getattr(dispatch, name)) for name in _CURSOR_EVENTS)


@overload
def run_alone(
    engine: Engine, statement: sa.TextClause, params: Mapping[str, Any], *, rows: Literal["one"] = "one"
) -> tuple[Any, ...] | None: ...


@overload
def run_alone(
    engine: Engine, statement: sa.TextClause, params: Mapping[str, Any], *, rows: Literal["all"]
) -> list[tuple[Any, ...]] | None: ...


def run_alone(
    engine: Engine, statement: sa.TextClause, params: Mapping[str, Any], *, rows: Literal["one", "all"] = "one"
) -> tuple[Any, ...] | list[tuple[Any, ...]] | None:
    """Run ``statement`` alone in autocommit; its row (``rows="one"``) or rows, ``None`` if its guard failed it.

    ``engine`` is a PostgreSQL engine on psycopg (an engine with execution options shares its pool).
    Errors other than the guard's are raised as SQLAlchemy raises them.
    """
    if engine.dialect.driver != "psycopg" or _traced(engine):
        return _through_sqlalchemy(engine, statement, params, rows)
    text = _driver_text(statement.text)
    pooled = engine.raw_connection()
    driver = pooled.driver_connection
    assert isinstance(driver, psycopg.Connection)
    try:
        driver.autocommit = True
        cursor = driver.execute(text, params)
        return cursor.fetchone() if rows == "one" else cursor.fetchall()
    except psycopg.errors.DivisionByZero:
        return None
    except psycopg.Error as error:
        invalidated = driver.closed or driver.broken  # SQLAlchemy's psycopg test of a disconnect
        if invalidated:
            pooled.invalidate(error)
            engine.pool.dispose()  # the idle ones went stale in the same restart
        raise sa.exc.DBAPIError.instance(
            text, dict(params), error, psycopg.Error, connection_invalidated=invalidated, dialect=engine.dialect
        ) from error
    except BaseException:
        pooled.invalidate()  # interrupted mid-statement: its state is unknown (as SQLAlchemy does)
        raise
    finally:
        if not (driver.closed or driver.broken):
            driver.autocommit = False  # as the pool's other users expect it
        pooled.close()


def _through_sqlalchemy(
    engine: Engine, statement: sa.TextClause, params: Mapping[str, Any], rows: Literal["one", "all"]
) -> tuple[Any, ...] | list[tuple[Any, ...]] | None:
    """:func:`run_alone` through SQLAlchemy's execution: the same text and round trip, seen by its events."""
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        try:
            result = conn.execute(statement, dict(params))
            return tuple(result.one()) if rows == "one" else [tuple(row) for row in result.all()]
        except sa.exc.DataError as error:
            if getattr(error.orig, "sqlstate", None) == DIVISION_BY_ZERO:
                return None
            raise
