"""The logging interface every component accepts (seed 001 "Logger").

Components take an optional :class:`Logger` and default to :data:`noop_logger`, so a library
embedded in someone else's app stays silent unless asked. :func:`std_logger` adapts the standard
``logging`` module; :data:`console_logger` is that adapter on the ``helix_dbos`` logger.
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
            self._logger.log(level, "%s %s", message, data)
        else:
            self._logger.log(level, "%s", message)

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
"""Discards everything (the default)."""

console_logger: Logger = std_logger()
"""Writes through ``logging.getLogger("helix_dbos")``; configure handlers as usual."""
