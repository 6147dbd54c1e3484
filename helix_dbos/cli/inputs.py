"""The CLI's inputs (a database URL, ``--agents``) checked up front, and its failures as one line.

A command-line user who mistyped a URL or a module path needs one line that says what is wrong and
what to do, not a 550-line traceback through SQLAlchemy and alembic. :class:`CliError` carries
that line (and the exit code: 2 for a bad argument, 1 for a problem met while running);
:func:`explain` turns the failures the CLI can foresee (database missing or unreachable, not
migrated, a driver not installed) into one. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from sqlalchemy import exc as sa_exc

from helix_dbos.agent import AgentConfig
from helix_dbos.errors import CheckpointNotFoundError, DatabaseUnavailableError, HelixError, SessionNotFoundError
from helix_dbos.store.retry import CONNECTING, RETRY_SECONDS_ENV

if TYPE_CHECKING:
    from helix_dbos.settings import HelixSettings

DEMO_AGENTS = "helix_dbos.demo:demo_agent"
"""What ``--agents demo`` stands for: the demo agent on the built-in scripted model."""

_URL_HINT = "use postgresql://user@host/dbname or sqlite:///path/to/file.sqlite"
_SUPPORTED_SCHEMES = ("postgresql", "postgres", "sqlite")
# The optional extras (pyproject.toml): the core installs lean, so a command that needs one names it.
_EXTRA_OF_MODULE = {
    "litellm": "litellm",
    "mcp": "litellm",
    "fastapi": "server",
    "starlette": "server",
    "sse_starlette": "server",
    "uvicorn": "server",
    "opentelemetry": "otel",
    "a2a": "a2a",
}


class CliError(Exception):
    """A failure the CLI reports as one line (``helix-dbos: <message>``) and an exit code."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def check_database_url(url: str) -> str:
    """``url`` if its scheme is one helix-dbos runs on; a :class:`CliError` (exit 2) otherwise.

    Only the scheme is echoed back: the rest of a URL may hold a password.
    """
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() not in _SUPPORTED_SCHEMES:
        shown = f"{scheme!r}" if sep else "no scheme"
        raise CliError(f"unsupported database URL ({shown}): {_URL_HINT}", exit_code=2)
    return url


def explain(exc: BaseException) -> CliError | None:
    """The one-line form of a failure the CLI can foresee, or ``None`` for anything else."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, sa_exc.NoSuchModuleError | sa_exc.ArgumentError):
        return CliError(f"cannot use this database URL ({_first_line(exc)}): {_URL_HINT}", exit_code=2)
    if isinstance(exc, sa_exc.DBAPIError):
        return CliError(_describe_database_error(exc))
    if isinstance(exc, SessionNotFoundError):
        return CliError(f"{exc.message}: helix-dbos sessions list shows the sessions there are")
    if isinstance(exc, CheckpointNotFoundError):
        return CliError(f"{exc.message}: helix-dbos sessions show {exc.session_id} lists its checkpoints")
    if isinstance(exc, DatabaseUnavailableError) and exc.operation == CONNECTING:
        return CliError(
            f"the database did not answer for {exc.elapsed_seconds:.0f} s ({exc.attempts} attempts): is it running, "
            f"and is --database-url (or HELIX_DATABASE_URL) right? {RETRY_SECONDS_ENV} sets how long to wait"
        )
    if isinstance(exc, HelixError):
        return CliError(exc.message)
    if isinstance(exc, OSError) and exc.filename:  # e.g. a SQLite path under a regular file
        return CliError(f"cannot open {exc.filename}: {exc.strerror} (is the path in --database-url right?)")
    if isinstance(exc, ModuleNotFoundError) and exc.name in ("psycopg", "psycopg2"):
        return CliError(f"the PostgreSQL driver {exc.name!r} is not installed: pip install 'psycopg[binary]'")
    if isinstance(exc, ModuleNotFoundError) and exc.name and exc.name.split(".")[0] in _EXTRA_OF_MODULE:
        extra = _EXTRA_OF_MODULE[exc.name.split(".")[0]]
        return CliError(f"{exc.name!r} is not installed: pip install 'helix-dbos[{extra}]'")
    return None


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _describe_database_error(exc: sa_exc.DBAPIError) -> str:
    """What went wrong with the database, without the SQL statement or its parameters."""
    detail = _first_line(exc)
    missing = re.search(r'database "([^"]+)" does not exist', detail)
    if missing:
        name = missing.group(1)
        return f"database {name!r} does not exist: create it (createdb {name}) or fix --database-url"
    if "connection refused" in detail.lower() or "could not connect" in detail.lower():
        return (
            "cannot reach the database server (connection refused): is PostgreSQL running, "
            "and are the host and port in --database-url right?"
        )
    if "password authentication failed" in detail or ("role" in detail and "does not exist" in detail):
        return f"the database refused the login ({detail.split(':')[-1].strip()}): check the user and password"
    if "unable to open database file" in detail:
        return "cannot open the SQLite file: is the path in --database-url right, and may this user write there?"
    if "does not exist" in detail and "relation" in detail:
        return f"the database has no helix-dbos tables yet ({detail}): run helix-dbos db upgrade"
    return f"database error: {detail}"


def load_agents(spec: str) -> list[AgentConfig]:
    """The agents ``--agents module:attribute`` names (``demo`` for the demo agent).

    Like uvicorn, the current directory is put on ``sys.path`` first, so ``--agents myapp:agents``
    finds ``./myapp.py``. The attribute may be an ``AgentConfig``, a list of them, or a function
    returning either; without ``:attribute`` it is ``agents``.
    """
    if spec == "demo":
        spec = DEMO_AGENTS
    module_name, _, attr = spec.partition(":")
    attr = attr or "agents"
    hint = "--agents takes module:attribute, e.g. myapp.agents:agents (or demo)"
    if not module_name or not module_name.replace(".", "").replace("_", "").isalnum():
        raise CliError(f"{spec!r} is not a module path: {hint}", exit_code=2)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    module = _import(module_name)
    if not hasattr(module, attr):
        raise CliError(f"module {module_name!r} has no attribute {attr!r}: {hint}", exit_code=2)
    value = getattr(module, attr)
    if callable(value) and not isinstance(value, AgentConfig):
        try:
            value = value()
        except Exception as exc:
            raise CliError(f"calling {spec} (to get the agents) failed: {type(exc).__name__}: {exc}") from None
    agents = [value] if isinstance(value, AgentConfig) else list(value) if isinstance(value, list | tuple) else None
    if not agents or not all(isinstance(a, AgentConfig) for a in agents):
        raise CliError(
            f"--agents {spec} must name an AgentConfig, a list of them, or a function returning one "
            f"(got {type(value).__name__})",
            exit_code=2,
        )
    return agents


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise CliError(
                f"cannot import {module_name!r} named by --agents: no such module in the current "
                "directory or on PYTHONPATH",
                exit_code=2,
            ) from None
        raise CliError(
            f"importing {module_name!r} failed: {exc} (a dependency of your module is not installed)"
        ) from None
    except SyntaxError as exc:
        raise CliError(f"importing {module_name!r} failed: {exc.msg} ({exc.filename}, line {exc.lineno})") from None
    except Exception as exc:
        raise CliError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc} "
            f"(python -c 'import {module_name}' shows the traceback)"
        ) from None


def configure_cli_logging(settings: HelixSettings) -> None:
    """Lifecycle logs on stderr for ``serve`` and ``worker``, at the settings' level and format.

    (``HELIX_LOG_LEVEL`` and ``HELIX_LOG_FORMAT``; ``HelixSettings`` has already refused a bad value.)
    """
    from helix_dbos.observability.log_setup import configure_logging

    configure_logging(settings.log_level, settings.log_format)


__all__ = ["DEMO_AGENTS", "CliError", "check_database_url", "configure_cli_logging", "explain", "load_agents"]
