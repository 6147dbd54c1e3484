"""The retry policy as pure logic: which errors are transient, backoff, the bound, nesting, config.

The behaviour against a real database restart is in ``tests/durability``; here the decisions.
"""

from __future__ import annotations

import inspect
import logging
import sqlite3
import time

import psycopg
import psycopg.errors
import pytest
import sqlalchemy as sa

from helix_dbos.errors import DatabaseUnavailableError, HelixError
from helix_dbos.store import SqlPendingCallStore, SqlSessionStore, SqlWorkerRegistry
from helix_dbos.store.retry import RetryPolicy, is_transient, retry_call

FAST = RetryPolicy(max_seconds=0.5, initial_backoff=0.001, max_backoff=0.01)


def wrapped(orig: BaseException, *, invalidated: bool = False) -> sa.exc.DBAPIError:
    """What SQLAlchemy raises around a driver error."""
    cls = sa.exc.OperationalError if isinstance(orig, psycopg.OperationalError | sqlite3.OperationalError) else None
    error = (cls or sa.exc.DBAPIError)("SELECT 1", {}, orig, connection_invalidated=invalidated)  # type: ignore[arg-type]
    return error


def sqlite_error(code: int) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database is locked")
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        # the server went away or refused us: no SQLSTATE at all
        (wrapped(psycopg.OperationalError("server closed the connection unexpectedly")), True),
        (wrapped(psycopg.OperationalError("connection failed: Connection refused")), True),
        (psycopg.OperationalError("consuming input failed"), True),
        # SQLSTATE classes and codes
        (wrapped(psycopg.errors.AdminShutdown()), True),  # 57P01
        (wrapped(psycopg.errors.CrashShutdown()), True),  # 57P02
        (wrapped(psycopg.errors.CannotConnectNow()), True),  # 57P03: starting up / shutting down
        (wrapped(psycopg.errors.ConnectionFailure()), True),  # 08006
        (wrapped(psycopg.errors.TooManyConnections()), True),  # 53300
        (wrapped(psycopg.errors.SerializationFailure()), True),  # 40001
        (wrapped(psycopg.errors.DeadlockDetected()), True),  # 40P01
        (wrapped(psycopg.errors.IdleInTransactionSessionTimeout()), True),  # 25P03
        (wrapped(psycopg.errors.ReadOnlySqlTransaction()), True),  # 25006: a demoted primary
        (wrapped(psycopg.errors.QueryCanceled()), False),  # 57014: a statement timeout stays a failure
        (wrapped(psycopg.errors.UntranslatableCharacter()), False),  # 22P05: the data is the problem
        (wrapped(psycopg.errors.UniqueViolation()), False),
        (wrapped(psycopg.errors.UndefinedTable()), False),
        (wrapped(psycopg.InterfaceError("the cursor is closed")), False),
        (wrapped(psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")), False),
        # SQLAlchemy's own view
        (wrapped(psycopg.errors.UniqueViolation(), invalidated=True), True),
        (sa.exc.TimeoutError("QueuePool limit reached"), True),
        # SQLite: busy / locked by error code, not by message
        (wrapped(sqlite_error(5)), True),
        (wrapped(sqlite_error(6)), True),
        (wrapped(sqlite_error(1)), False),
        # not database errors at all
        (HelixError("nope"), False),
        (ValueError("database is locked"), False),
    ],
)
def test_transient_errors_are_recognised_by_type_and_sqlstate(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_a_transient_error_is_retried_with_a_warning_until_it_clears(caplog: pytest.LogCaptureFixture) -> None:
    failures = [wrapped(psycopg.OperationalError("server closed the connection unexpectedly"))] * 3
    calls = 0

    def flaky() -> str:
        nonlocal calls
        calls += 1
        if failures:
            raise failures.pop()
        return "done"

    with caplog.at_level(logging.WARNING, logger="helix_dbos.store.retry"):
        assert retry_call(flaky, policy=FAST, operation="op") == "done"
    assert calls == 4
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3 and all("op failed (OperationalError" in r.getMessage() for r in warnings)


def test_a_permanent_error_is_raised_at_once() -> None:
    calls = 0

    def bad() -> None:
        nonlocal calls
        calls += 1
        raise wrapped(psycopg.errors.UniqueViolation())

    with pytest.raises(sa.exc.DBAPIError):
        retry_call(bad, policy=FAST, operation="op")
    assert calls == 1


def test_past_the_bound_the_error_is_clear_safe_and_retryable() -> None:
    cause = wrapped(psycopg.OperationalError('connection to server at "10.1.2.3", port 5432 failed'))

    def down() -> None:
        raise cause

    started = time.monotonic()
    with pytest.raises(DatabaseUnavailableError) as failure:
        retry_call(down, policy=FAST, operation="SqlSessionStore.commit_step")
    assert 0.5 <= time.monotonic() - started < 2.0
    error = failure.value
    assert error.code == "transport_error" and error.retryable and error.__cause__ is cause
    assert error.attempts > 3 and "SqlSessionStore.commit_step" in error.message
    assert "10.1.2.3" not in error.message and "5432" not in error.message


def test_nested_calls_retry_only_at_the_outermost_level() -> None:
    inner_calls = 0

    def inner() -> None:
        nonlocal inner_calls
        inner_calls += 1
        raise wrapped(psycopg.errors.AdminShutdown())

    def outer() -> None:
        retry_call(inner, policy=FAST, operation="inner")

    with pytest.raises(DatabaseUnavailableError) as failure:
        retry_call(outer, policy=FAST, operation="outer")
    assert failure.value.operation == "outer"
    assert inner_calls == failure.value.attempts  # one inner call per outer attempt, never a loop in a loop


def test_a_zero_bound_disables_retries() -> None:
    calls = 0

    def down() -> None:
        nonlocal calls
        calls += 1
        raise wrapped(psycopg.errors.AdminShutdown())

    with pytest.raises(sa.exc.OperationalError):
        retry_call(down, policy=RetryPolicy(max_seconds=0), operation="op")
    assert calls == 1


@pytest.mark.parametrize(
    "message",
    [
        'connection failed: connection to server at "127.0.0.1", port 5 failed: FATAL:  database "nope" does not exist',
        'connection to server at "h", port 5 failed: FATAL:  password authentication failed for user "u"',
    ],
)
def test_a_connection_the_server_refused_for_good_is_not_retried(message: str) -> None:
    assert not is_transient(psycopg.OperationalError(message))


@pytest.mark.parametrize(
    "message",
    [
        'connection failed: connection to server at "h", port 5 failed: FATAL:  the database system is starting up',
        'connection failed: connection to server at "h", port 5 failed: FATAL:  sorry, too many clients already',
        'connection failed: connection to server at "h", port 5 failed: Connection refused',
    ],
)
def test_a_connection_refused_while_the_server_restarts_is_retried(message: str) -> None:
    assert is_transient(psycopg.OperationalError(message))


_NO_TRANSACTION = {"close", "open_calls"}
"""Public methods that open no transaction of their own (``open_calls`` filters ``get``, which retries)."""


@pytest.mark.parametrize("store_class", [SqlSessionStore, SqlPendingCallStore, SqlWorkerRegistry])
def test_every_store_operation_retries_transient_errors(store_class: type) -> None:
    """A store method without ``@retrying`` fails a run (or a worker's start) on a database restart.

    ``list_running_runs`` once lacked it, and a worker started during a PostgreSQL restart exited
    inside ``launch()``'s orphan scan.
    """
    unwrapped = [
        name
        for name, member in vars(store_class).items()
        if inspect.isfunction(member)
        and not name.startswith("_")
        and name not in _NO_TRANSACTION
        and not hasattr(member, "__wrapped__")
    ]
    assert unwrapped == []


def test_a_stale_pooled_connection_after_a_restart_is_retried_not_pinged(
    pg_store: SqlSessionStore, pg_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's pool does not ping on checkout; a connection killed under it costs one retry.

    Terminating every backend of the database is what a restart does to a pool: each pooled
    connection's next statement fails. The store call still succeeds (the retry runs the whole
    transaction again on a fresh connection), and the pool replaces all of its stale connections.
    """
    assert pg_store.engine.pool._pre_ping is False  # the property under test
    pg_store.create_session("s-stale", agent_type="agent", custom_state={}, now_ms=1)
    assert pg_store.session_exists("s-stale")  # at least one connection now sits in the pool
    with psycopg.connect(pg_store_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    with caplog.at_level(logging.WARNING, logger="helix_dbos.store.retry"):
        assert pg_store.session_exists("s-stale")
        assert pg_store.load_session("s-stale") is not None
    # One failed statement for the whole pool: the disconnect invalidates every older connection.
    assert [r.levelno for r in caplog.records if r.name == "helix_dbos.store.retry"] == [logging.WARNING]
