"""A guarded statement alone, straight to psycopg (``helix_dbos.store.alone``), against the real server.

The step commit, a stream's batch and a stream's end run through ``run_alone``. These pin what the
rest of the store relies on: the same rows as SQLAlchemy's execution, ``None`` for a failed guard,
SQLAlchemy's own exceptions for every other error, a disconnect that invalidates the connection and
the pool's idle ones (so the retry that follows gets a fresh connection), a connection handed back
to the pool out of autocommit, and SQLAlchemy's execution whenever a cursor listener is attached.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos.store.alone import run_alone
from helix_dbos.store.engine import create_engine_for
from helix_dbos.store.retry import is_transient

pytestmark = pytest.mark.postgres

GUARDED = sa.text("SELECT CAST(:a AS text) AS a, CAST(:n AS int) + 1 AS n, 1 / CAST(:ok AS int) AS guard")
ROWS = sa.text("SELECT g, CAST(:tag AS text) || g AS label, '100%' AS percent FROM generate_series(1, :n) AS g")


@pytest.fixture
def engine(pg_database_url: str) -> Iterator[sa.Engine]:
    engine = create_engine_for(pg_database_url)
    yield engine
    engine.dispose()


def connects(engine: sa.Engine) -> list[object]:
    """SQLAlchemy ``Connection`` objects made on ``engine`` from now on (not a cursor event)."""
    made: list[object] = []
    sa.event.listen(engine, "engine_connect", lambda conn: made.append(conn))
    return made


def test_the_row_and_the_rows_are_what_sqlalchemy_returns(engine: sa.Engine) -> None:
    made = connects(engine)
    one = run_alone(engine, GUARDED, {"a": "x:y", "n": 41, "ok": 1})
    many = run_alone(engine, ROWS, {"tag": "t", "n": 3}, rows="all")
    assert made == []  # straight to psycopg: no SQLAlchemy connection
    with engine.connect() as conn:
        expected_one = tuple(conn.execute(GUARDED, {"a": "x:y", "n": 41, "ok": 1}).one())
        expected_many = [tuple(row) for row in conn.execute(ROWS, {"tag": "t", "n": 3}).all()]
    assert one == expected_one == ("x:y", 42, 1)
    assert many == expected_many == [(1, "t1", "100%"), (2, "t2", "100%"), (3, "t3", "100%")]


def test_a_failed_guard_is_none_and_writes_nothing(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (k int PRIMARY KEY)"))
    insert = sa.text("WITH i AS (INSERT INTO t VALUES (:k) RETURNING k) SELECT 1 / CAST(:ok AS int) FROM i")
    assert run_alone(engine, insert, {"k": 1, "ok": 0}) is None
    assert run_alone(engine, insert, {"k": 2, "ok": 1}) == (1,)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT k FROM t ORDER BY k")).scalars().all() == [2]


def test_other_errors_are_sqlalchemys_and_the_connection_goes_back_out_of_autocommit(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (k int PRIMARY KEY)"))
    insert = sa.text("INSERT INTO t VALUES (:k) RETURNING k")
    assert run_alone(engine, insert, {"k": 1}) == (1,)
    with pytest.raises(sa.exc.IntegrityError) as conflict:
        run_alone(engine, insert, {"k": 1})
    assert getattr(conflict.value.orig, "sqlstate", None) == "23505"
    with pytest.raises(sa.exc.DataError):
        run_alone(engine, sa.text("SELECT CAST(:v AS int)"), {"v": "not a number"})
    assert not is_transient(conflict.value)
    # The pool's connection is the one the errors ran on (it keeps the last one returned first):
    # out of autocommit, so a transaction on it is still one.
    with engine.connect() as conn:
        assert conn.connection.driver_connection.autocommit is False  # type: ignore[union-attr]
        conn.execute(sa.text("INSERT INTO t VALUES (2)"))
        conn.rollback()
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM t")).scalar() == 1


def test_a_disconnect_invalidates_the_pool_and_the_next_statement_gets_a_fresh_connection(engine: sa.Engine) -> None:
    held = [engine.connect() for _ in range(3)]  # three pooled connections, then all idle
    pids = [conn.execute(sa.text("SELECT pg_backend_pid()")).scalar() for conn in held]
    for conn in held:
        conn.close()
    admin = sa.create_engine(engine.url, poolclass=sa.NullPool)  # terminates them (a restart, as they see it)
    with admin.connect() as conn:
        conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM unnest(CAST(:p AS int[])) AS pid"), {"p": pids})
    admin.dispose()
    assert engine.pool.checkedin() == 3

    with pytest.raises(sa.exc.DBAPIError) as lost:
        run_alone(engine, GUARDED, {"a": "a", "n": 1, "ok": 1})
    assert lost.value.connection_invalidated and is_transient(lost.value)
    assert engine.pool.checkedin() == 0  # the stale idle ones are gone with it
    assert run_alone(engine, GUARDED, {"a": "a", "n": 1, "ok": 1}) == ("a", 2, 1)  # what the retry gets


def test_a_cursor_listener_sees_every_statement(engine: sa.Engine) -> None:
    """A tracer (OpenTelemetry's SQLAlchemy instrumentation) or a test counting round trips sees the same text."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    assert run_alone(engine, GUARDED, {"a": "a", "n": 1, "ok": 0}) is None
    autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")  # as the stream's engine is
    assert run_alone(autocommit, ROWS, {"tag": "t", "n": 1}, rows="all") == [(1, "t1", "100%")]
    assert [s.split(" AS ")[0] for s in seen] == ["SELECT CAST(%(a)s", "SELECT g, CAST(%(tag)s"]
