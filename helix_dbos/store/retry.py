"""Riding out database restarts: transient errors are retried where the connection is used.

A PostgreSQL restart, crash or failover drops every connection; for a few seconds new ones are
refused ("connection refused", "the database system is starting up"). Nothing is wrong with the
work in flight: the same transaction, run again once the server is back, succeeds. So every store
and stream operation (one short transaction each) runs under :func:`retry_call`: on a *transient*
error it rolls back, waits with exponential backoff and jitter, logs a warning, and runs the whole
transaction again, for at most :attr:`RetryPolicy.max_seconds` (default 120 s: a restart or a
managed failover; ``HelixSettings.retry_seconds``, ``HELIX_DB_RETRY_SECONDS``, sets it for a process).
Past the bound it raises :class:`DatabaseUnavailableError`, a ``transport_error`` whose message names
no host or SQL (the driver's error is its ``__cause__`` and is in the log): a run that fails with it
can be continued with ``retry()`` once the database is back.

The model is DBOS's own system-database retry (``dbos._sys_db.db_retry`` and
``dbos._utils.retriable_postgres_exception``), with two differences: DBOS blocks without a bound
(its step records cannot fail), and errors are classified here by exception type and SQLSTATE class,
never by message text:

- SQLAlchemy marked the connection invalidated (``DBAPIError.connection_invalidated``), or a pool
  checkout timed out (``sqlalchemy.exc.TimeoutError``);
- psycopg ``OperationalError`` without a SQLSTATE: the client lost or could not open the connection
  ("server closed the connection unexpectedly", "connection refused", "consuming input failed");
- SQLSTATE class ``08`` (connection exception) and ``53`` (insufficient resources: too many
  connections, out of memory or disk, all of which pass);
- ``57P01`` admin shutdown, ``57P02`` crash shutdown, ``57P03`` cannot connect now (starting up,
  shutting down, in recovery), ``57P05`` idle session timeout;
- ``40001`` serialization failure and ``40P01`` deadlock (the transaction was rolled back whole),
  ``25P03`` idle-in-transaction timeout, ``25006`` read-only transaction (a pool still connected to a
  primary that was demoted by a failover);
- SQLite ``SQLITE_BUSY`` / ``SQLITE_LOCKED`` (by error code), after SQLite's own busy timeout.

Query cancellation (``57014``, a statement timeout) is *not* transient: running it again would undo
the cancel. Neither is anything about the data (``22xxx``, ``23xxx``): those fail at once.

Every operation retried must be safe to run twice, because a connection can drop after the server
committed and before the client heard so. The store's are: step commits are keyed by
``(run_id, step)`` and a second commit is reported as already applied; runs are keyed by their
``run_id``; stream chunks written from workflow code carry a dedupe key; the rest are guarded
updates or reads. Nested retried calls (a store method calling another) retry only at the outermost
level, so the bound holds for the whole operation.
"""

from __future__ import annotations

import functools
import logging
import math
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, Final, ParamSpec, Protocol, TypeVar, cast

import psycopg
import sqlalchemy as sa

from helix_dbos.errors import DatabaseUnavailableError

__all__ = [
    "CONNECTING",
    "DEFAULT_RETRY_SECONDS",
    "RETRY_SECONDS_ENV",
    "RetryAttempt",
    "RetryPolicy",
    "is_transient",
    "retry_call",
    "retrying",
]

_log = logging.getLogger("helix_dbos.store.retry")

RETRY_SECONDS_ENV: Final = "HELIX_DB_RETRY_SECONDS"
"""The variable :class:`~helix_dbos.settings.HelixSettings` reads the bound from (named in messages)."""
DEFAULT_RETRY_SECONDS: Final = 120.0
"""Long enough for a restart (seconds) or a managed failover (typically 30-120 s)."""
CONNECTING: Final = "connecting to the database"
"""The operation of start-up's first contact (``wait_for_database``), as its final error names it."""

_TRANSIENT_SQLSTATE_CLASSES: Final = frozenset({"08", "53"})
_TRANSIENT_SQLSTATES: Final = frozenset({"57P01", "57P02", "57P03", "57P05", "40001", "40P01", "25P03", "25006"})
_SQLITE_BUSY: Final = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how often a database operation is retried on transient errors.

    ``max_seconds`` bounds the time spent retrying (``0``: never retry; ``math.inf``: wait forever,
    as DBOS does for its own records). Waits start at ``initial_backoff`` and double up to
    ``max_backoff``, each multiplied by a random factor in [0.5, 1.5) so that many callers that lost
    their connections together do not reconnect in lockstep.
    """

    max_seconds: float = DEFAULT_RETRY_SECONDS
    initial_backoff: float = 0.05
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if not self.max_seconds >= 0 or self.initial_backoff < 0 or self.max_backoff < self.initial_backoff:
            raise ValueError(f"invalid retry policy {self!r}")


def is_transient(error: BaseException) -> bool:
    """Whether running the same transaction again, later, may succeed (see the module docstring)."""
    if isinstance(error, sa.exc.TimeoutError):
        return True  # pool checkout timed out: connections are busy or being re-established
    driver_error: BaseException | None = error
    if isinstance(error, sa.exc.DBAPIError):
        if error.connection_invalidated:
            return True
        driver_error = error.orig
    if isinstance(driver_error, psycopg.Error):
        sqlstate = driver_error.sqlstate
        if sqlstate is None:
            # No SQLSTATE: the server never answered (refused, dropped, reset). A client-side misuse
            # (InterfaceError, ProgrammingError) has none either, but is not an OperationalError.
            return isinstance(driver_error, psycopg.OperationalError) and not _refused_for_good(driver_error)
        return sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES or sqlstate in _TRANSIENT_SQLSTATES
    if isinstance(driver_error, sqlite3.OperationalError):
        return getattr(driver_error, "sqlite_errorcode", None) in _SQLITE_BUSY
    return False


def _refused_for_good(error: psycopg.OperationalError) -> bool:
    """Whether a failed connection attempt was refused by the server for a reason that will last.

    libpq reports a server's refusal at connection time as text with no SQLSTATE ("FATAL: database
    "x" does not exist", "password authentication failed"), so here, and only here, the message is
    all there is to go on. A server that is starting, stopping or full says so in the FATAL line too,
    and that passes.
    """
    message = str(error)
    if "FATAL:" not in message:
        return False
    return not any(phrase in message for phrase in _PASSING_FATAL_PHRASES)


_PASSING_FATAL_PHRASES: Final = (
    "starting up",
    "shutting down",
    "in recovery mode",
    "not yet accepting connections",
    "recovery state has not been yet reached",
    "too many clients",
    "too many connections",
    "terminating connection",
    "out of memory",
)


@dataclass(frozen=True)
class RetryAttempt:
    """A failed attempt of a retried operation, about to be followed by a wait and another attempt."""

    operation: str
    """What was attempted (``"connecting to the database"``)."""
    error: BaseException
    """The transient error the attempt failed with."""
    attempt: int
    """How many attempts have failed so far (1 for the first)."""
    elapsed_seconds: float
    """Seconds since the first failure."""
    wait_seconds: float
    """How long the retry waits before the next attempt."""
    max_seconds: float
    """The bound (:attr:`RetryPolicy.max_seconds`)."""

    @property
    def remaining_seconds(self) -> float:
        """Seconds left before the retry gives up."""
        return max(0.0, self.max_seconds - self.elapsed_seconds)

    def error_line(self) -> str:
        """The driver's error on one line (``OperationalError: connection ... refused``), for logs."""
        return _one_line(self.error)


class _Depth(threading.local):
    active = False


_depth = _Depth()

T = TypeVar("T")
P = ParamSpec("P")


def retry_call(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    operation: str,
    on_retry: Callable[[RetryAttempt], None] | None = None,
) -> T:
    """Call ``fn`` (one whole transaction), retrying transient database errors under ``policy``.

    A call made while another retried call is running in this thread runs once: the outer call
    owns the retries, so nested operations never multiply the bound.

    Each retry is logged as a warning, and giving up as an error, unless ``on_retry`` is given: then
    it is called before each wait instead, and the caller, which gets the final
    :class:`DatabaseUnavailableError`, reports that too (start-up's first contact with a database
    says one line, not one per attempt: :func:`helix_dbos.runtime.launch.wait_for_database`).
    """
    depth = _depth
    if depth.active:
        return fn()
    depth.active = True
    try:
        return fn()  # the hot path: one call, no clock read, no allocation
    except Exception as first:
        if policy.max_seconds <= 0 or not is_transient(first):
            raise
        return _retry_after(first, fn, policy, operation, on_retry)
    finally:
        depth.active = False


def _retry_after(
    first: Exception,
    fn: Callable[[], T],
    policy: RetryPolicy,
    operation: str,
    on_retry: Callable[[RetryAttempt], None] | None = None,
) -> T:
    error = first
    started = time.monotonic()
    backoff = policy.initial_backoff
    attempts = 1
    while True:
        elapsed = time.monotonic() - started
        remaining = policy.max_seconds - elapsed
        if remaining <= 0:
            if on_retry is not None:
                raise DatabaseUnavailableError(operation, elapsed, attempts, error) from error
            _log.error(
                "database unavailable: %s gave up after %d attempts in %.1f s: %s",
                operation,
                attempts,
                elapsed,
                _one_line(error),
            )
            raise DatabaseUnavailableError(operation, elapsed, attempts, error) from error
        wait = min(backoff * (0.5 + random.random()), remaining)
        if on_retry is not None:
            on_retry(RetryAttempt(operation, error, attempts, elapsed, wait, policy.max_seconds))
        else:
            _log.warning(
                "database unavailable: %s failed (%s); retrying in %.2f s (attempt %d, %.1f s of %s s)",
                operation,
                _one_line(error),
                wait,
                attempts,
                elapsed,
                "inf" if math.isinf(policy.max_seconds) else f"{policy.max_seconds:g}",
            )
        time.sleep(wait)
        backoff = min(backoff * 2, policy.max_backoff)
        attempts += 1
        try:
            return fn()
        except Exception as exc:
            if not is_transient(exc):
                raise
            error = exc


def _one_line(error: BaseException) -> str:
    orig = error.orig if isinstance(error, sa.exc.DBAPIError) else error
    text = str(orig).strip().splitlines()
    return f"{type(orig).__name__}: {text[0] if text else ''}"


class _HasRetryPolicy(Protocol):
    @property
    def retry_policy(self) -> RetryPolicy: ...


S = TypeVar("S", bound=_HasRetryPolicy)


def retrying(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """Decorate a method that runs one whole transaction: retry it under ``self.retry_policy``."""
    operation = method.__qualname__

    @functools.wraps(method)
    def wrapper(self: S, *args: P.args, **kwargs: P.kwargs) -> T:
        depth = _depth
        if depth.active:
            return method(self, *args, **kwargs)
        depth.active = True
        try:
            return method(self, *args, **kwargs)
        except Exception as first:
            policy = self.retry_policy
            if policy.max_seconds <= 0 or not is_transient(first):
                raise
            return _retry_after(first, lambda: method(self, *args, **kwargs), policy, operation)
        finally:
            depth.active = False

    return cast(Callable[Concatenate[S, P], T], wrapper)
