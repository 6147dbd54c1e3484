"""Logging: stdlib ``logging`` inside helix-dbos, the seeds' ``Logger`` as an adapter over it.

One approach, and why: helix-dbos is a library embedded in someone else's process, so it logs the
way Python libraries do, to ``logging.getLogger("helix_dbos.<area>")`` (``helix_dbos.runtime``,
``helix_dbos.store.retry``, ``helix_dbos.stream.sql``, ``helix_dbos.llm``, ``helix_dbos.service``):
the host application configures handlers, levels and formats once, for every library, and DBOS,
SQLAlchemy and uvicorn already log there. Modules that log call ``logging.getLogger`` directly.

The seeds (001 "Logger") define a small ``Logger`` interface (``debug/info/warn/error(message,
data)``) that components accept. It is kept for parity, so a user porting code from the seeds can
pass their own logger to :class:`~helix_dbos.runtime.executor.DBOSAgentExecutor` or
:func:`~helix_dbos.runtime.launch.launch`, but it is only an adapter: the default is
:func:`std_logger`, which forwards to a stdlib logger (``data`` rides along as ``extra={"data": ...}``
for structured handlers), never a second logging system. :data:`noop_logger` discards everything,
for a caller that asks for silence; :data:`console_logger` is the seeds' name for the adapter on
the ``helix_dbos`` logger.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol


class Logger(Protocol):
    """Structured logger: a message plus optional data (compatible with ``logging``-style adapters)."""

    def debug(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Log detail useful when debugging."""

    def info(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Log a normal event."""

    def warn(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Log something that went wrong but was handled."""

    def error(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Log a failure."""


class _NoopLogger:
    def debug(self, message: str, data: dict[str, Any] | None = None) -> None:
        pass

    def info(self, message: str, data: dict[str, Any] | None = None) -> None:
        pass

    def warn(self, message: str, data: dict[str, Any] | None = None) -> None:
        pass

    def error(self, message: str, data: dict[str, Any] | None = None) -> None:
        pass


class StdLogger:
    """Adapts :class:`Logger` calls to a standard-library ``logging.Logger``."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def _log(self, level: int, message: str, data: dict[str, Any] | None) -> None:
        if data:
            self._logger.log(level, "%s %s", message, data, extra={"data": data}, stacklevel=3)
        else:
            self._logger.log(level, "%s", message, stacklevel=3)

    def debug(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Log at DEBUG."""
        self._log(logging.DEBUG, message, data)

    def info(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Log at INFO."""
        self._log(logging.INFO, message, data)

    def warn(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Log at WARNING."""
        self._log(logging.WARNING, message, data)

    def error(self, message: str, data: dict[str, Any] | None = None) -> None:
        """Log at ERROR."""
        self._log(logging.ERROR, message, data)


def std_logger(name: str = "helix_dbos") -> StdLogger:
    """A :class:`Logger` writing to the standard ``logging`` logger ``name``."""
    return StdLogger(logging.getLogger(name))


noop_logger: Logger = _NoopLogger()
"""Discards everything, for a caller that asks for silence."""

console_logger: Logger = std_logger()
"""Writes through ``logging.getLogger("helix_dbos")``; configure handlers as usual."""
