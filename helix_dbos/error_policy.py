"""Error policy: turning anything raised into a :class:`~helix_dbos.errors.HelixError`, and what a client may see.

The exception tree is :mod:`helix_dbos.errors` (which re-exports these names); this module is the
policy over it:

- **classification**: :func:`classify_error` gives any exception the most specific code it can
  (:func:`ensure_error` and :func:`extract_error_message` are its building blocks);
- **disclosure**: what a *client* may see of an error is narrower than what an operator may: a
  database driver's message holds the SQL statement, its parameters and, after an outage, the
  database's host and port. :func:`public_error_message` is the one place that decides what of an
  error is safe to show; call it wherever an error is recorded or returned for a client, and log
  the original. :func:`database_error_kind` tells a database out of reach from one that refused.
"""

from __future__ import annotations

import asyncio
import re
from typing import Literal

from helix_dbos.errors import HelixError


def extract_error_message(value: object) -> str:
    """Best-effort human message from anything that was raised or returned as an error."""
    if isinstance(value, HelixError):
        return value.message
    if isinstance(value, BaseException):
        text = str(value)
        return text if text else type(value).__name__
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        message = value.get("message")
        if isinstance(message, str):
            return message
    message_attr = getattr(value, "message", None)
    if isinstance(message_attr, str):
        return message_attr
    return str(value) if value is not None else "null"


def ensure_error(value: object) -> BaseException:
    """Return ``value`` if it is an exception, else wrap it, keeping the original as ``__cause__``-like data."""
    if isinstance(value, BaseException):
        return value
    error = HelixError(extract_error_message(value))
    error.original = value  # type: ignore[attr-defined]
    return error


def classify_error(value: object) -> HelixError:
    """Turn any error into a :class:`HelixError` with the most specific code we can tell.

    HelixErrors pass through; cancellation maps to ``framework_cancelled``; pydantic validation
    failures to ``validation_error``; timeouts to ``provider_timeout``; anything else to
    ``framework_internal_error``. Provider exceptions are classified by the LLM adapter, which
    knows the provider's exception types.
    """
    if isinstance(value, HelixError):
        return value
    error = ensure_error(value)
    message = extract_error_message(error)
    if isinstance(error, asyncio.CancelledError | KeyboardInterrupt):
        return HelixError(message or "cancelled", code="framework_cancelled", retryable=False, cause=error)
    if type(error).__name__ == "ValidationError":
        return HelixError(message, code="validation_error", retryable=False, cause=error)
    if isinstance(error, TimeoutError):
        return HelixError(message or "timed out", code="provider_timeout", retryable=True, cause=error)
    if isinstance(error, NotImplementedError):
        return HelixError(message, code="framework_not_supported", retryable=False, cause=error)
    return HelixError(message, code="framework_internal_error", retryable=False, cause=error)


# -- what clients may see ------------------------------------------------------------------------------

_DRIVER_MODULES = ("sqlalchemy", "psycopg", "psycopg2", "sqlite3", "asyncpg", "pg8000")

_DATABASE_TEXT = re.compile(
    r"\[SQL: |\[parameters: |sqlalche\.me/|\(psycopg|\(sqlite3\.|\(asyncpg|psycopg\.errors\.|"
    r"connection to server (?:at|on)|server closed the connection|could not connect to server|"
    r"UntranslatableCharacter|CharacterNotInRepertoire|terminating connection due to",
    re.IGNORECASE,
)
"""Text only a database driver writes: an error message holding it is a database error's."""

_UNAVAILABLE_TEXT = re.compile(
    r"connection (?:refused|failed|reset|timed out|is closed|already closed|was closed|lost)|"
    r"server closed the connection|could not connect|terminating connection|admin shutdown|"
    r"the database system is (?:starting up|shutting down|in recovery mode)|no route to host|"
    r"consuming input failed|\bInterfaceError\b",
    re.IGNORECASE,
)
"""Text of a database that is out of reach (rather than one that refused a statement)."""

_CREDENTIAL_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/'\"<>@]*@[^\s'\"<>]*", re.IGNORECASE)
_DATABASE_URL = re.compile(
    r"\b(?:postgres(?:ql)?|mysql|mariadb|sqlite|oracle|mssql|cockroachdb)(?:\+[a-z0-9_]+)?://[^\s'\"<>]*",
    re.IGNORECASE,
)

DatabaseErrorKind = Literal["unavailable", "error"]


def _driver_errors(error: BaseException) -> list[BaseException]:
    """``error`` and its causes raised by a database driver or SQLAlchemy."""
    found: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__module__.split(".", 1)[0] in _DRIVER_MODULES:
            found.append(current)
        current = current.__cause__ or current.__context__
    return found


def database_error_kind(error: BaseException | str) -> DatabaseErrorKind | None:
    """``"unavailable"`` for a database out of reach, ``"error"`` for another database failure, else ``None``.

    Decided from the exception's class (and its causes) when there is one, else from driver-only
    text, so errors recorded as strings classify the same way.
    """
    if isinstance(error, BaseException):
        drivers = _driver_errors(error)
        if not drivers:
            text = str(error)
            return _text_kind(text) if _DATABASE_TEXT.search(text) else None
        for driver in drivers:
            names = {cls.__name__ for cls in type(driver).__mro__}
            if names & {"InterfaceError", "DisconnectionError"} or getattr(driver, "connection_invalidated", False):
                return "unavailable"
            if "OperationalError" in names and _UNAVAILABLE_TEXT.search(str(driver)):
                return "unavailable"
        return "error"
    return _text_kind(error) if _DATABASE_TEXT.search(error) else None


def _text_kind(text: str) -> DatabaseErrorKind:
    return "unavailable" if _UNAVAILABLE_TEXT.search(text) else "error"


def _error_class_name(error: BaseException | str) -> str | None:
    if isinstance(error, BaseException):
        drivers = _driver_errors(error)
        return type(drivers[0] if drivers else error).__name__
    match = re.match(r"\s*([A-Z][A-Za-z0-9_]*(?:Error|Exception))\b", error)
    return match.group(1) if match else None


def public_error_message(error: BaseException | str | None) -> str:
    """The part of an error that is safe to show a client; log ``error`` itself for operators.

    A database error becomes a fixed sentence naming its class and whether the database was out of
    reach (so a client knows a retry may work), without its SQL, parameters, host or port; any other
    message is kept, with database URLs and credentials in URLs blanked. Idempotent, so text that
    already went through it (or a stored error) can go through it again.
    """
    if error is None:
        return "failed"
    kind = database_error_kind(error)
    if kind is not None:
        name = _error_class_name(error)
        label = f" ({name})" if name else ""
        if kind == "unavailable":
            return (
                f"The database was unavailable{label}: the connection was lost or refused. "
                "Retry once it is back; details are in the server logs."
            )
        return f"A database error{label} stopped this operation; details are in the server logs."
    if isinstance(error, HelixError):
        text = error.message
    elif isinstance(error, BaseException):
        message = str(error)
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    else:
        text = error
    text = _DATABASE_URL.sub("<database url>", text)
    return _CREDENTIAL_URL.sub("<url>", text)


__all__ = [
    "DatabaseErrorKind",
    "classify_error",
    "database_error_kind",
    "ensure_error",
    "extract_error_message",
    "public_error_message",
]
