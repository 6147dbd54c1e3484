"""Every error the service returns has one JSON shape, and each error code one HTTP status.

Clients branch on ``error.code``, never on message text, so the mapping below is part of the HTTP
contract::

    {"error": {"code": "state_session_not_found", "message": "...", "retryable": false}}

=====  =====================================================================================
HTTP   codes
=====  =====================================================================================
401    ``unauthenticated``: send valid credentials
404    ``state_session_not_found``, ``state_agent_not_found``, ``state_tool_call_not_found``,
       ``state_checkpoint_not_found``, ``state_schedule_not_found``, ``framework_route_not_found``: check the id (every
       ``*_not_found`` code is a 404)
405    ``framework_method_not_allowed`` (the ``Allow`` header lists the methods)
408    ``transport_result_timeout``: the run is still going; ask again to keep waiting
409    ``state_already_running``, ``state_not_resumable``, ``state_concurrency_conflict``,
       ``state_conflict``, ``state_agent_mismatch`` (the session is another agent's),
       ``framework_cancelled``: the session's state does not allow this now
413    ``validation_body_too_large``
429    ``tenant_budget_exceeded``: the caller's tenant spent its budget (``retryable`` when the
       budget has a period)
422    ``validation_error`` (with ``details``), ``validation_invalid_text`` (NUL or a lone
       surrogate in any string; ``details`` say where), ``validation_invalid_schedule`` (a cron
       expression, time zone or backfill window refused): fix the request
500    ``framework_internal_error``: a bug; the details are in the server's log, never here
503    ``transport_error`` (``retryable``; ``Retry-After`` when the database is out of reach)
=====  =====================================================================================

A 422 means the request itself is malformed, which the OpenAPI schema can say; a well-formed request
that does not fit what exists is a 404 (it names nothing) or a 409 (it conflicts with the session:
another agent than the session's, an answer of the wrong kind for the pending call, an approval for
other arguments). So any request the schema calls valid gets a 2xx, 401, 404, 408, 409 or 503.

Messages are safe to show: what a database driver wrote (SQL, parameters, hosts) goes through
:func:`helix_dbos.errors.public_error_message` and reaches the logs only. Validation ``details``
carry the location and pydantic's message, never the submitted value (it could hold a secret).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, create_model
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from helix_dbos.errors import ERROR_CODES, HelixError, ServiceError, database_error_kind, public_error_message

logger = logging.getLogger("helix_dbos.service")

UNAUTHENTICATED = "unauthenticated"
"""The one error code that is not a seeds' code: the seeds' server leaves authentication to a hook."""

STATUS_BY_CODE: dict[str, int] = {
    UNAUTHENTICATED: 401,
    "validation_error": 422,
    "validation_invalid_text": 422,
    "validation_invalid_schedule": 422,
    "tool_input_invalid": 422,
    "validation_body_too_large": 413,
    "state_session_not_found": 404,
    "state_agent_not_found": 404,
    "state_tool_call_not_found": 404,
    "state_checkpoint_not_found": 404,
    "state_schedule_not_found": 404,
    "tool_not_found": 404,
    "framework_route_not_found": 404,
    "framework_method_not_allowed": 405,
    "transport_result_timeout": 408,
    "state_already_running": 409,
    "state_not_resumable": 409,
    "state_agent_mismatch": 409,
    "state_concurrency_conflict": 409,
    "state_conflict": 409,
    "framework_cancelled": 409,
    "framework_internal_error": 500,
    "framework_not_supported": 501,
    "guardrail_tripped": 422,
    "tenant_budget_exceeded": 429,
    "tool_execution_failed": 502,
    "transport_error": 503,
    "tool_timeout": 504,
    **{code: 502 for code in ERROR_CODES if code.startswith("provider_")},
}
"""The HTTP status of every error code (the seeds' codes and the service's own)."""

HTTP_ERROR_CODES = frozenset(
    {
        UNAUTHENTICATED,
        "validation_body_too_large",
        "framework_route_not_found",
        "framework_method_not_allowed",
        "transport_result_timeout",
    }
)
"""Codes only the HTTP layer answers (no library call raises them)."""


class ErrorDetail(BaseModel):
    """One problem found while validating a request."""

    model_config = ConfigDict(extra="forbid")

    loc: list[str | int]
    """Where: ``["body", "input", "message"]``, ``["query", "limit"]``, ``["path", "session_id"]``."""
    msg: str
    type: str
    """pydantic's error type (``missing``, ``extra_forbidden``, ``json_invalid``, ...) or ``invalid_text``."""


class ErrorInfo(BaseModel):
    """The body of an error response."""

    model_config = ConfigDict(extra="forbid")

    code: str
    """An error code; its HTTP status is fixed (see the table in this module)."""
    message: str
    retryable: bool = False
    """Whether sending the same request again may succeed."""
    details: list[ErrorDetail] | None = None


class ErrorResponse(BaseModel):
    """``{"error": {...}}``: every non-2xx response of the service."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorInfo


def status_for(code: str) -> int:
    """The HTTP status of an error code (500 for a code this version does not know)."""
    return STATUS_BY_CODE.get(code, 500)


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


def coded_error_response(
    code: str,
    message: str,
    *,
    retryable: bool = False,
    details: list[ErrorDetail] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """:func:`error_response` with the status that ``code`` maps to."""
    return error_response(status_for(code), code, message, retryable=retryable, details=details, headers=headers)


def unauthenticated_response() -> JSONResponse:
    """401 with a ``WWW-Authenticate`` challenge, as RFC 6750 asks of bearer-token servers."""
    return coded_error_response(
        UNAUTHENTICATED, "Missing or invalid credentials", headers={"WWW-Authenticate": 'Bearer realm="helix-dbos"'}
    )


def validation_error_response(details: list[ErrorDetail], *, code: str = "validation_error") -> JSONResponse:
    """422 for a request that failed validation (``code`` ``validation_error`` or ``validation_invalid_text``)."""
    return coded_error_response(code, _summary(details), details=details)


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
    status = status_for(exc.code)
    if status >= 500:
        logger.error("helix-dbos service: %s %s failed: %r", request.method, request.url.path, exc)
    return error_response(status, exc.code, public_error_message(exc), retryable=exc.retryable)


async def _on_service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    return coded_error_response(exc.code, exc.message, retryable=exc.retryable)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return validation_error_response(_details(exc.errors()))


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 401:
        return unauthenticated_response()
    if exc.status_code == 404:
        message = f"No operation at {request.method} {request.url.path}"
        return coded_error_response("framework_route_not_found", message, headers=exc.headers)
    if exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
        return coded_error_response("framework_method_not_allowed", message, headers=_allow_header(request, exc))
    if exc.status_code == 413:
        return coded_error_response("validation_body_too_large", str(exc.detail), headers=exc.headers)
    if exc.status_code < 500:
        # FastAPI's 400 "error parsing the body": the request is invalid, like any other 422.
        detail = ErrorDetail(loc=["body"], msg=str(exc.detail), type="body_invalid")
        return validation_error_response([detail])
    return await unexpected_error_response(request, exc)


def _allow_header(request: Request, exc: StarletteHTTPException) -> Mapping[str, str] | None:
    """The ``Allow`` header of a 405: every method some route serves at the path.

    Starlette's names only the methods of the first route matching the path; a path served by two
    routes (``GET`` and ``POST /v1/schedules``, one handler each) would list one of them. Each
    method is tried against the app's routes as the router itself would.
    """
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)
    ]
    if not allowed:
        return exc.headers
    return {**(exc.headers or {}), "Allow": ", ".join(allowed)}


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def is_handled(exc: BaseException) -> bool:
    """Whether a registered handler turns ``exc`` into a specific error response."""
    return isinstance(exc, HelixError | ServiceError | RequestValidationError | StarletteHTTPException)


async def unexpected_error_response(request: Request, exc: Exception) -> JSONResponse:
    """503 for a database out of reach, else 500: the details are logged, none returned."""
    logger.error("helix-dbos service: unexpected error in %s %s", request.method, request.url.path, exc_info=exc)
    if database_error_kind(exc) == "unavailable":
        return coded_error_response(
            "transport_error",
            "The database is unavailable; try again shortly",
            retryable=True,
            headers={"Retry-After": "1"},
        )
    return coded_error_response("framework_internal_error", "Internal server error")


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception a request can raise to the JSON error shape."""
    app.add_exception_handler(HelixError, _on_helix_error)
    app.add_exception_handler(ServiceError, _on_service_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, unexpected_error_response)


# -- OpenAPI ---------------------------------------------------------------------------------------------

_DESCRIPTIONS: dict[int, str] = {
    401: "Missing or invalid credentials; nothing was done.",
    404: "An id in the request names nothing here.",
    405: "Method not allowed.",
    408: "The run did not finish in time; it goes on: ask again.",
    409: "The session's state does not allow this now.",
    413: "The request body is larger than the server accepts.",
    422: "Invalid request (`details` say where); nothing was done.",
    500: "Unexpected server error; the details are in the server's log.",
    503: "A dependency (the database, a stream) is unavailable for now; retryable.",
}


def _camel(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("_"))


@functools.cache
def error_model(codes: tuple[str, ...]) -> type[BaseModel]:
    """The error response model whose ``code`` is one of ``codes`` (one OpenAPI component per set)."""
    name = "Error" + "Or".join(_camel(code) for code in codes)
    info = create_model(
        f"{name}Info",
        __config__=ConfigDict(extra="forbid", title=f"{name}Info"),
        __doc__=f"An error whose code is one of: {', '.join(codes)}.",
        code=(str, Field(json_schema_extra={"enum": list(codes)})),
        message=(str, ...),
        retryable=(bool, False),
        details=(list[ErrorDetail] | None, None),
    )
    return create_model(
        name,
        __config__=ConfigDict(extra="forbid", title=name),
        __doc__=f'`{{"error": {{...}}}}` with code {" | ".join(codes)}.',
        error=(info, ...),
    )


COMMON_ERROR_CODES: tuple[str, ...] = (
    UNAUTHENTICATED,
    "validation_error",
    "validation_invalid_text",
    "framework_internal_error",
    "transport_error",
)
"""Codes every authenticated route can answer: credentials, validation, a bug, the database away."""


def error_responses(*codes: str, body: bool = False) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` for a route answering :data:`COMMON_ERROR_CODES` and ``codes``.

    ``body``: the route takes a request body (so it can answer 413).
    """
    every = [*COMMON_ERROR_CODES, *(["validation_body_too_large"] if body else []), *codes]
    by_status: dict[int, list[str]] = {}
    for code in every:
        listed = by_status.setdefault(status_for(code), [])
        if code not in listed:
            listed.append(code)
    return {
        status: {"model": error_model(tuple(listed)), "description": _describe(status, listed)}
        for status, listed in sorted(by_status.items())
    }


def _describe(status: int, codes: Iterable[str]) -> str:
    return f"{_DESCRIPTIONS.get(status, 'Error.')} Codes: {', '.join(f'`{c}`' for c in codes)}."


__all__ = [
    "COMMON_ERROR_CODES",
    "HTTP_ERROR_CODES",
    "STATUS_BY_CODE",
    "UNAUTHENTICATED",
    "ErrorDetail",
    "ErrorInfo",
    "ErrorResponse",
    "coded_error_response",
    "error_model",
    "error_response",
    "error_responses",
    "install_error_handlers",
    "is_handled",
    "status_for",
    "unauthenticated_response",
    "unexpected_error_response",
    "validation_error_response",
]
