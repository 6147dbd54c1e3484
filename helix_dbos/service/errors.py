"""Every error the service returns has one JSON shape, and one HTTP status per error code.

Clients branch on ``error.code`` (the seeds' error codes, plus ``unauthenticated``), never on
message text, so the mapping below is part of the HTTP contract::

    {"error": {"code": "state_session_not_found", "message": "...", "retryable": false}}

Validation failures (malformed JSON included) also carry ``details``: one entry per problem, with
its location and pydantic's message, but never the submitted value (it could hold a secret).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from helix_dbos.errors import HelixError
from helix_dbos.store.hitl import PendingToolCallNotFoundError

logger = logging.getLogger("helix_dbos.service")

UNAUTHENTICATED = "unauthenticated"
"""The one error code that is not a seeds' code: the seeds' server leaves authentication to a hook."""

_STATUS_BY_CODE: dict[str, int] = {
    "validation_error": 422,
    "tool_input_invalid": 422,
    "state_session_not_found": 404,
    "tool_not_found": 404,
    "state_already_running": 409,
    "state_not_resumable": 409,
    "state_agent_mismatch": 409,
    "state_concurrency_conflict": 409,
    "framework_cancelled": 409,
    "framework_not_supported": 501,
    "transport_error": 503,
    "tool_timeout": 504,
    "tool_execution_failed": 502,
    "framework_internal_error": 500,
}


class ErrorDetail(BaseModel):
    """One problem found while validating a request."""

    model_config = ConfigDict(extra="forbid")

    loc: list[str | int]
    """Where: ``["body", "input", "message"]``, ``["query", "limit"]``, ``["header", "last-event-id"]``."""
    msg: str
    type: str
    """pydantic's error type (``missing``, ``extra_forbidden``, ``json_invalid``, ...)."""


class ErrorInfo(BaseModel):
    """The body of an error response."""

    model_config = ConfigDict(extra="forbid")

    code: str
    """A seeds' error code (``state_session_not_found``, ``validation_error``, ...) or ``unauthenticated``."""
    message: str
    retryable: bool = False
    """Whether sending the same request again may succeed."""
    details: list[ErrorDetail] | None = None


class ErrorResponse(BaseModel):
    """``{"error": {...}}``: every non-2xx response of the service."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorInfo


class AgentNotFoundError(HelixError):
    """The request names an agent this server does not serve (HTTP 404, code ``validation_error``)."""

    def __init__(self, name: str, served: Sequence[str]) -> None:
        super().__init__(
            f"Agent {name!r} is not registered on this server (it serves: {', '.join(served) or 'no agents'})",
            code="validation_error",
            retryable=False,
        )
        self.name = name


class ResultTimeoutError(HelixError):
    """The run did not finish within the wait the client asked for (HTTP 408); ask again to keep waiting."""

    def __init__(self, session_id: str, run_id: str, timeout_seconds: float) -> None:
        super().__init__(
            f"Run {run_id!r} of session {session_id!r} did not finish within {timeout_seconds:g} s; "
            "it is still going: ask again to keep waiting",
            code="transport_error",
            retryable=True,
        )


def status_for(error: HelixError) -> int:
    """The HTTP status of a :class:`HelixError`: by class where the code is too coarse, else by code."""
    if isinstance(error, AgentNotFoundError | PendingToolCallNotFoundError):
        return 404
    if isinstance(error, ResultTimeoutError):
        return 408
    if error.code.startswith("provider_"):
        return 502
    return _STATUS_BY_CODE.get(error.code, 500)


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    retryable: bool = False,
    details: list[ErrorDetail] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """Build the one error shape; ``details`` is left out when there are none."""
    body = ErrorResponse(error=ErrorInfo(code=code, message=message, retryable=retryable, details=details))
    return JSONResponse(
        body.model_dump(mode="json", exclude_none=True), status_code=status, headers=dict(headers) if headers else None
    )


def unauthenticated_response() -> JSONResponse:
    """401 with a ``WWW-Authenticate`` challenge, as RFC 6750 asks of bearer-token servers."""
    return error_response(
        401,
        UNAUTHENTICATED,
        "Missing or invalid credentials",
        headers={"WWW-Authenticate": 'Bearer realm="helix-dbos"'},
    )


def _details(errors: Sequence[Any]) -> list[ErrorDetail]:
    return [
        ErrorDetail(
            loc=[part if isinstance(part, int) else str(part) for part in error.get("loc", ())],
            msg=str(error.get("msg", "")),
            type=str(error.get("type", "")),
        )
        for error in errors
    ]


def _summary(details: list[ErrorDetail]) -> str:
    shown = "; ".join(f"{'.'.join(str(p) for p in d.loc) or 'request'}: {d.msg}" for d in details[:5])
    more = f" (and {len(details) - 5} more)" if len(details) > 5 else ""
    return f"Invalid request: {shown}{more}"


async def _on_helix_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HelixError)
    status = status_for(exc)
    if status >= 500:
        logger.error("helix-dbos service: %s %s failed: %r", request.method, request.url.path, exc)
    return error_response(status, exc.code, exc.message, retryable=exc.retryable)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = _details(exc.errors())
    return error_response(422, "validation_error", _summary(details), details=details)


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 401:
        return unauthenticated_response()
    if exc.status_code in (404, 405):
        # An unknown route or method: the operation does not exist here.
        message = f"No operation {request.method} {request.url.path}"
        return error_response(exc.status_code, "framework_not_supported", message, headers=exc.headers)
    code = "framework_internal_error" if exc.status_code >= 500 else "validation_error"
    return error_response(exc.status_code, code, str(exc.detail), headers=exc.headers)


def is_handled(exc: BaseException) -> bool:
    """Whether a registered handler turns ``exc`` into a specific error response."""
    return isinstance(exc, HelixError | RequestValidationError | StarletteHTTPException)


async def unexpected_error_response(request: Request, exc: Exception) -> JSONResponse:
    """500 ``framework_internal_error``: the details are logged, none returned (they can leak internals)."""
    logger.error("helix-dbos service: unexpected error in %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "framework_internal_error", "Internal server error")


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception a request can raise to the JSON error shape."""
    app.add_exception_handler(HelixError, _on_helix_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, unexpected_error_response)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        401: "Missing or invalid credentials (code `unauthenticated`).",
        404: "Unknown session, agent or pending tool call.",
        409: "The session's state does not allow this (`state_already_running`, `state_not_resumable`, "
        "`state_concurrency_conflict`).",
        422: "Invalid request (code `validation_error`): malformed JSON, wrong types, unknown fields.",
        500: "Unexpected server error (code `framework_internal_error`).",
    }.items()
}
"""OpenAPI ``responses=`` shared by every authenticated route (replaces FastAPI's default 422 schema)."""

__all__ = [
    "ERROR_RESPONSES",
    "UNAUTHENTICATED",
    "AgentNotFoundError",
    "ErrorDetail",
    "ErrorInfo",
    "ErrorResponse",
    "ResultTimeoutError",
    "error_response",
    "install_error_handlers",
    "is_handled",
    "status_for",
    "unauthenticated_response",
    "unexpected_error_response",
]
