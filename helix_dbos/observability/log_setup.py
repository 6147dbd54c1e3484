"""Logging for the processes helix-dbos runs itself (``helix-dbos serve`` / ``worker``).

A library leaves handlers to its host application; a command line is the application, so
``serve`` and ``worker`` call :func:`configure_logging`: one handler on the ``helix_dbos`` logger
tree (not the root, so uvicorn's and DBOS's own handlers are untouched; records still propagate,
so an agents module that configures the root logger sees them too), at ``HelixSettings.log_level``
(``HELIX_LOG_LEVEL``, default ``INFO``: the lifecycle logs show), as text or, with
``HelixSettings.log_format`` ``json`` (``HELIX_LOG_FORMAT=json``), one JSON
object per line carrying the records' structured fields (``event``, ``session_id``, ``run_id``, ...).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

LOG_LEVEL_ENV = "HELIX_LOG_LEVEL"
"""The variable :class:`~helix_dbos.settings.HelixSettings` reads the level from (named in messages)."""
LOG_FORMAT_ENV = "HELIX_LOG_FORMAT"
"""The variable :class:`~helix_dbos.settings.HelixSettings` reads the format from (named in messages)."""
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC), level, logger, message, and every ``extra`` field."""

    converter = time.gmtime  # type: ignore[assignment]  # typeshed: gmtime's argument is optional

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class _HelixHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure_logging` installs (a second call replaces it).

    Without an explicit stream it writes to whatever ``sys.stderr`` is at the time of each record,
    so a command run in-process by a test runner that swaps stderr never leaves a closed stream behind.
    """

    def __init__(self, stream: IO[str] | None) -> None:
        super().__init__(stream or sys.stderr)
        self._follow_stderr = stream is None

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` (to the current ``sys.stderr`` unless a stream was given)."""
        if self._follow_stderr:
            self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: str = "INFO", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Send the ``helix_dbos`` loggers to ``stream`` (stderr) at ``level``, as ``text`` or ``json``.

    The command line passes its settings' ``log_level`` and ``log_format``.
    Raises ``ValueError`` for an unknown level or format.
    """
    level_name = level.upper()
    format_name = fmt.lower()
    if not isinstance(logging.getLevelName(level_name), int):
        raise ValueError(f"unknown log level {level_name!r} (DEBUG, INFO, WARNING, ERROR)")
    if format_name not in ("text", "json"):
        raise ValueError(f"unknown log format {format_name!r} (text or json)")
    handler = _HelixHandler(stream)
    handler.setFormatter(JsonFormatter() if format_name == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger("helix_dbos")
    for old in [h for h in root.handlers if isinstance(h, _HelixHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_name)


__all__ = ["LOG_FORMAT_ENV", "LOG_LEVEL_ENV", "JsonFormatter", "configure_logging"]
