"""One configuration object: :class:`HelixSettings`, and the one place ``HELIX_*`` is read.

The entry points build it: :func:`~helix_dbos.runtime.launch.launch` takes ``settings=`` (without
it, :meth:`HelixSettings.from_env`), the command line builds one from the environment and its
flags, and ``serve`` passes it on. Everything below them (stores, stream managers, locks) takes
explicit values and never reads the environment: a store built without a retry policy gets the
documented default, not whatever the process happens to have set. This is the shape of DBOS's
``DBOSConfig`` and Temporal's ``envconfig``: the environment is read once, at the edge.

Precedence, everywhere: an explicit argument or flag, then the environment, then the default.
An empty variable counts as unset (as Click treats it).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from helix_dbos.errors import HelixError
from helix_dbos.runtime.hitl import DEFAULT_HOT_WINDOW_SECONDS
from helix_dbos.store.retry import DEFAULT_RETRY_SECONDS, RetryPolicy

__all__ = [
    "DEFAULT_DATABASE_URL",
    "ENV",
    "HelixSettings",
    "LogFormat",
]

DEFAULT_DATABASE_URL: Final = "sqlite:///.helix/helix.sqlite"
"""The embedded default: SQLite files under ``.helix/`` in the current directory."""

LogFormat = Literal["text", "json"]

ENV: Final[Mapping[str, str]] = {
    "database_url": "HELIX_DATABASE_URL",
    "executor_id": "HELIX_EXECUTOR_ID",
    "retry_seconds": "HELIX_DB_RETRY_SECONDS",
    "hot_window_seconds": "HELIX_HOT_WINDOW_SECONDS",
    "run_queue": "HELIX_RUN_QUEUE",
    "rate_limits": "HELIX_RATE_LIMITS",
    "log_level": "HELIX_LOG_LEVEL",
    "log_format": "HELIX_LOG_FORMAT",
    "otlp_endpoint": "HELIX_OTLP_ENDPOINT",
    "api_tokens": "HELIX_API_TOKENS",
    "tenant_tokens": "HELIX_TENANT_TOKENS",
}
"""The environment variable of each setting."""

_DBOS_EXECUTOR_ID: Final = "DBOS__VMID"
"""DBOS's own executor-id variable (set by DBOS Cloud), read when ``HELIX_EXECUTOR_ID`` is not."""


def _invalid(setting: str, message: str) -> HelixError:
    return HelixError(f"{ENV[setting]} ({setting}) {message}", code="validation_error")


@dataclass(frozen=True, kw_only=True)
class HelixSettings:
    """How a helix-dbos process is configured: typed, immutable, validated when built.

    ``HelixSettings()`` is every default; :meth:`from_env` reads the ``HELIX_*`` variables;
    :meth:`override` applies explicit values (flags, keyword arguments) on top.
    """

    database_url: str = field(default=DEFAULT_DATABASE_URL, repr=False)
    """SQLAlchemy URL of the one database (PostgreSQL or SQLite) for DBOS and the store."""
    executor_id: str | None = None
    """This process's executor id (``HELIX_EXECUTOR_ID``, else ``DBOS__VMID``); ``None``: claim a free one."""
    retry_seconds: float = DEFAULT_RETRY_SECONDS
    """How long a database operation retries transient errors (seconds; ``0`` disables retries)."""
    hot_window_seconds: float = DEFAULT_HOT_WINDOW_SECONDS
    """How long a wait blocks in its run before the run parks (seconds): for a person's answer, a
    sub-agent, or a provider's admission (a rate limit)."""
    run_queue: str | None = None
    """The run queue spec (``NAME[:SETTINGS]``, see ``RunQueue.parse``); ``None``: runs start locally."""
    rate_limits: str | None = None
    """Provider rate limits shared by every process on the database, ``;``-separated
    ``MATCH:requests=N/SECONDS,concurrency=C`` specs (see ``ProviderRateLimit.parse``); ``None``: none."""
    log_level: str = "INFO"
    """Level of the ``helix_dbos`` loggers that ``serve`` and ``worker`` print."""
    log_format: LogFormat = "text"
    """``text``, or ``json``: one JSON object per line with the structured fields."""
    otlp_endpoint: str | None = None
    """OTLP/HTTP base URL to export spans to; ``None``: no exporter is installed."""
    api_tokens: tuple[str, ...] = field(default=(), repr=False)
    """Bearer tokens the HTTP service accepts (``serve``), for the default tenant."""
    tenant_tokens: tuple[str, ...] = field(default=(), repr=False)
    """``TENANT=TOKEN`` pairs: bearer tokens of named tenants (``serve``; :mod:`helix_dbos.tenancy`).

    The tenant comes first because a tenant name never holds ``=`` and a token may (base64).
    """

    def __post_init__(self) -> None:
        if not self.database_url:
            raise _invalid("database_url", "must not be empty")
        if not (self.retry_seconds >= 0):  # also refuses NaN
            raise _invalid(
                "retry_seconds", f"must be a number of seconds >= 0 (0 disables retries), not {self.retry_seconds!r}"
            )
        if not (self.hot_window_seconds >= 0) or math.isinf(self.hot_window_seconds):
            raise _invalid(
                "hot_window_seconds", f"must be a finite number of seconds >= 0, not {self.hot_window_seconds!r}"
            )
        if self.rate_limits is not None:
            from helix_dbos.runtime.rate_limits import parse_rate_limits

            try:
                parse_rate_limits(self.rate_limits)
            except HelixError as exc:
                raise _invalid("rate_limits", exc.message) from None
        level = self.log_level.upper()
        if not isinstance(logging.getLevelName(level), int):
            raise _invalid("log_level", f"must be a log level (DEBUG, INFO, WARNING, ERROR), not {self.log_level!r}")
        object.__setattr__(self, "log_level", level)
        fmt = self.log_format.lower()
        if fmt not in ("text", "json"):
            raise _invalid("log_format", f"must be text or json, not {self.log_format!r}")
        object.__setattr__(self, "log_format", fmt)
        object.__setattr__(self, "api_tokens", tuple(self.api_tokens))
        object.__setattr__(self, "tenant_tokens", tuple(self.tenant_tokens))
        self.bearer_tokens()  # refuses a malformed pair now, naming the variable

    def bearer_tokens(self) -> dict[str, str]:
        """Every bearer token the service accepts, with its tenant (``api_tokens``: the default tenant)."""
        from helix_dbos.tenancy import DEFAULT_TENANT, check_tenant

        tokens = dict.fromkeys(self.api_tokens, DEFAULT_TENANT)
        for pair in self.tenant_tokens:
            tenant, sep, token = pair.partition("=")
            if not sep or not token:
                raise _invalid("tenant_tokens", "must be TENANT=TOKEN pairs (comma-separated)")
            try:
                check_tenant(tenant)
            except HelixError as exc:
                raise _invalid("tenant_tokens", exc.message) from None
            tokens[token] = tenant
        return tokens

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> HelixSettings:
        """The settings the ``HELIX_*`` variables of ``environ`` name; the default for each one unset.

        Raises :class:`~helix_dbos.errors.HelixError` (``validation_error``) naming the variable
        when a value is not valid.
        """

        def get(name: str) -> str | None:
            value = environ.get(name, "").strip()
            return value or None

        values: dict[str, Any] = {}
        for setting, name in ENV.items():
            raw = get(name)
            if raw is None:
                continue
            if setting in ("retry_seconds", "hot_window_seconds"):
                try:
                    values[setting] = float(raw)
                except ValueError:
                    raise _invalid(setting, f"must be a number of seconds, not {raw!r}") from None
            elif setting in ("api_tokens", "tenant_tokens"):
                values[setting] = tuple(token.strip() for token in raw.split(",") if token.strip())
            else:
                values[setting] = raw
        if "executor_id" not in values and (vmid := get(_DBOS_EXECUTOR_ID)):
            values["executor_id"] = vmid
        return cls(**values)

    def override(self, **values: Any) -> HelixSettings:
        """A copy with ``values`` applied, skipping those that are ``None`` (a flag or argument not given)."""
        given = {name: value for name, value in values.items() if value is not None}
        return dataclasses.replace(self, **given) if given else self

    @property
    def retry_policy(self) -> RetryPolicy:
        """The :class:`~helix_dbos.store.retry.RetryPolicy` for :attr:`retry_seconds`."""
        return RetryPolicy(max_seconds=self.retry_seconds)

    def __repr__(self) -> str:
        from sqlalchemy.engine import make_url

        try:
            shown = make_url(self.database_url).render_as_string(hide_password=True)
        except Exception:  # not a URL SQLAlchemy parses: show nothing of it rather than a password
            shown = "<unparsed>"
        fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)
        tokens = f"<{len(self.api_tokens) + len(self.tenant_tokens)} token(s)>"
        return f"HelixSettings(database_url={shown!r}, {fields}, api_tokens={tokens})"
