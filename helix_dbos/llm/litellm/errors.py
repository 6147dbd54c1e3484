"""Error mapping: a LiteLLM / openai / httpx exception -> a :class:`HelixError` with a ``provider_*`` code.

The codes decide what is retried and what fails over to another model (the schedule and the
rules are :mod:`helix_dbos.llm.retry`'s); the server's ``Retry-After`` is read here, from the
exception, into ``HelixError.retry_after_seconds``. Classification never imports LiteLLM (or
openai, or httpx): it looks their exception classes up only in modules already imported, so a
process that never loaded them pays nothing, and their absence cannot break it.
"""

from __future__ import annotations

import email.utils
import re
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from helix_dbos.errors import HelixError, classify_error
from helix_dbos.llm.retry import retry_delay_seconds

__all__ = ["classify_provider_error", "retry_delay_seconds"]

_MISSING_CREDENTIALS = re.compile(
    r"missing credentials|missing [\w .-]{0,40}api[ _-]?key|api_key client option must be set"
    r"|no api[ _-]?key|api[ _-]?key (?:is )?(?:not set|missing|required)",
    re.IGNORECASE,
)
_ENV_VAR = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_KEY|AUTH_TOKEN|ACCESS_KEY_ID)\b")
_CONTENT_FILTER = re.compile(r"content[_ ]policy|safety system|content management policy", re.IGNORECASE)
_OVERLOADED = re.compile(r"overloaded", re.IGNORECASE)


def _module_class(module: str, name: str) -> type[BaseException] | None:
    """Look a class up in an already imported module; classification must not import LiteLLM itself."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _is(exc: BaseException, *names: tuple[str, str]) -> bool:
    return any((cls := _module_class(m, n)) is not None and isinstance(exc, cls) for m, n in names)


def _status_code(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response_status = getattr(getattr(exc, "response", None), "status_code", None)
    return response_status if isinstance(response_status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` (delta or HTTP date) response headers."""
    for source in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        if not source:
            continue
        headers = {str(k).lower(): str(v) for k, v in dict(source).items()}
        try:
            if "retry-after-ms" in headers:
                return float(headers["retry-after-ms"]) / 1000.0
            if "retry-after" in headers:
                value = headers["retry-after"]
                try:
                    return float(value)
                except ValueError:
                    return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError, OverflowError):
            continue
    return None


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError) or _is(exc, ("openai", "APITimeoutError"), ("httpx", "TimeoutException")):
        return True
    original = getattr(exc, "original_exception", None)  # LiteLLM's MidStreamFallbackError wraps the cause
    return isinstance(original, BaseException) and original is not exc and _is_timeout(original)


def _is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, ConnectionError | socket.gaierror) or _is(
        exc, ("openai", "APIConnectionError"), ("httpx", "TransportError")
    )


def _env_hint(message: str, provider: str | None) -> str:
    names = sorted(set(_ENV_VAR.findall(message)))
    if not names and provider:
        names = [f"{provider.upper()}_API_KEY"]
    return " or ".join(names) if names else "the provider's API-key environment variable"


@dataclass(frozen=True)
class _Failure:
    """What classification reads from one exception, and how it builds the resulting error."""

    exc: BaseException
    message: str
    status: int | None
    provider: str | None

    @property
    def who(self) -> str:
        return self.provider or "the provider"

    def error(self, text: str, code: Any, retryable: bool, retry_after: float | None = None) -> HelixError:
        return HelixError(
            text,
            code=code,
            retryable=retryable,
            status_code=self.status,
            cause=self.exc,
            retry_after_seconds=retry_after,
        )


def _by_meaning(f: _Failure) -> HelixError | None:
    """Failures recognised by what they say, whatever their status: credentials, policy, context."""
    if _MISSING_CREDENTIALS.search(f.message):
        return f.error(
            f"Credentials for {f.who} are missing: set {_env_hint(f.message, f.provider)} or pass "
            f"LLMConfig.api_key ({f.message})",
            "provider_auth_error",
            False,
        )
    if _is(f.exc, ("litellm", "ContentPolicyViolationError")) or (
        f.status in (None, 400) and _CONTENT_FILTER.search(f.message)
    ):
        return f.error(
            f"{f.who} refused the request under its content policy: {f.message}",
            "provider_content_filtered",
            False,
        )
    if _is(f.exc, ("litellm", "ContextWindowExceededError")):
        return f.error(
            f"The request exceeds the model's context window: {f.message}",
            "provider_context_window_exceeded",
            False,
        )
    return None


def _by_status(f: _Failure) -> HelixError | None:
    """Failures recognised by HTTP status (timeouts also by exception class)."""
    who, message, status = f.who, f.message, f.status
    if status == 408 or _is_timeout(f.exc):
        return f.error(f"{who} timed out: {message}", "provider_timeout", True)
    if status in (401, 403):
        return f.error(
            f"{who} rejected the credentials ({status}); check LLMConfig.api_key or "
            f"{_env_hint(message, f.provider)}: {message}",
            "provider_auth_error",
            False,
        )
    if status == 429:
        return f.error(f"{who} rate-limited the request: {message}", "provider_rate_limited", True, _retry_after(f.exc))
    if status in (503, 529) or (_OVERLOADED.search(message) and (status is None or status >= 500)):
        return f.error(f"{who} is overloaded: {message}", "provider_overloaded", True, _retry_after(f.exc))
    if status is not None and status >= 500:
        return f.error(f"{who} failed ({status}): {message}", "provider_error", True, _retry_after(f.exc))
    if status is not None and status >= 400:
        return f.error(f"{who} rejected the request ({status}): {message}", "provider_invalid_request", False)
    return None


def classify_provider_error(exc: BaseException, *, provider: str | None = None) -> HelixError:
    """Map a LiteLLM / openai / httpx exception to a :class:`HelixError` with a ``provider_*`` code.

    Classification is by HTTP status first (LiteLLM's class names are unreliable: a 401 from an
    OpenAI-compatible server arrives as ``BadRequestError`` with ``status_code=401``), then by the
    LiteLLM classes that encode meaning (``ContentPolicyViolationError``,
    ``ContextWindowExceededError``), then by message for missing credentials, which LiteLLM
    reports as a 500 for ``openai/`` and a connection error for ``gemini/``.
    """
    if isinstance(exc, HelixError):
        return exc
    failure = _Failure(exc=exc, message=str(exc) or type(exc).__name__, status=_status_code(exc), provider=provider)
    for rule in (_by_meaning, _by_status):
        classified = rule(failure)
        if classified is not None:
            return classified
    if _is_connection_error(exc):
        return failure.error(f"Could not reach {failure.who}: {failure.message}", "provider_error", True)
    return classify_error(exc)
