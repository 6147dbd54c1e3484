"""What every authenticated route does before FastAPI parses anything: the edge checks.

In order, each answered with the service's JSON error shape and nothing done:

1. **Authenticate** (401 ``unauthenticated``): an unauthenticated request learns nothing, not even
   whether its body was valid. The principal's tenant goes on ``request.state.tenant``.
2. **Keep to the tenant** (404 ``state_session_not_found``): a route whose path names a session
   (``{session_id}``) of another tenant answers exactly as for a session that does not exist, so
   neither its content nor its existence leaks; one check here covers every such route, present
   and future.
3. **Bound the body** (413 ``validation_body_too_large``), read once and cached for FastAPI.
4. **Refuse text that cannot be stored** (422 ``validation_invalid_text``): NUL or a lone surrogate
   in a path parameter, a query parameter, or any string (keys included) of a JSON body, found by
   :mod:`helix_dbos.validation`. A body that is not UTF-8 is a 422 ``validation_error``.

Checking the raw request rather than the parsed models keeps one rule for every route, including
the free-form parts of a body (``state``, ``metadata``, a client tool's ``result``) that no model
describes.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect

from helix_dbos.errors import SessionNotFoundError, printable_location
from helix_dbos.service.auth import Authenticator, principal_tenant
from helix_dbos.service.errors import (
    ErrorDetail,
    coded_error_response,
    is_handled,
    unauthenticated_response,
    unexpected_error_response,
    validation_error_response,
)
from helix_dbos.validation import find_invalid_text, text_problem

_BODY_METHODS = ("POST", "PUT", "PATCH")


async def read_limited_body(request: Request, limit: int | None) -> Response | None:
    """Read the body up to ``limit`` bytes (cached on the request for FastAPI); a 413 response beyond it.

    Done here rather than with FastAPI's ``max_body_size``, which answers before authentication and
    in plain text: this way an oversized body gets the JSON error shape, and only after the caller
    was authenticated.
    """
    too_large = coded_error_response("validation_body_too_large", f"Request body larger than {limit} bytes")
    declared = request.headers.get("content-length")
    if limit is not None and declared is not None and declared.isdigit() and int(declared) > limit:
        return too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if limit is not None and size > limit:
                return too_large
            chunks.append(chunk)
    except ClientDisconnect:
        # Nobody reads this answer; it only has to be one the route documents.
        detail = ErrorDetail(loc=["body"], msg="The client disconnected while sending the body", type="body_incomplete")
        return validation_error_response([detail])
    request._body = b"".join(chunks)  # Starlette's own cache: FastAPI's body parsing reads it from here
    return None


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI parses a body of this type as JSON (its own rule, strict content types)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def invalid_text_response(request: Request) -> Response | None:
    """422 for the first path parameter, query parameter or JSON body string that cannot be accepted."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and (problem := text_problem(value)) is not None:
            return _refuse(("path", name), problem)
    for name, value in request.query_params.multi_items():
        found = find_invalid_text({name: value})
        if found is not None:
            return _refuse(("query", *found[0]), found[1])
    body: bytes | None = getattr(request, "_body", None)
    if not body or not _is_json(request.headers.get("content-type")):
        return None
    try:
        document = json.loads(body)
    except UnicodeDecodeError:
        detail = ErrorDetail(loc=["body"], msg="The body is not valid UTF-8 JSON", type="json_invalid")
        return validation_error_response([detail])
    except RecursionError:
        detail = ErrorDetail(loc=["body"], msg="The body is nested too deeply", type="json_invalid")
        return validation_error_response([detail])
    except ValueError:
        return None  # not JSON: FastAPI answers it with its own 422 json_invalid, with the position
    found = find_invalid_text(document, ("body",))
    return _refuse(*found) if found is not None else None


def _refuse(location: tuple[str | int, ...], problem: str) -> Response:
    detail = ErrorDetail(loc=list(printable_location(location)), msg=problem, type="invalid_text")
    return validation_error_response([detail], code="validation_invalid_text")


SessionTenantLookup = Callable[[str], Awaitable[str | None]]
"""``session_id -> its tenant`` (``None``: no such session), run off the event loop."""


def guarded_route_class(
    authenticator: Authenticator, max_body_bytes: int | None, tenant_of_session: SessionTenantLookup
) -> type[APIRoute]:
    """A route class that runs the edge checks (module docstring) before FastAPI parses anything."""

    class GuardedRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                try:
                    principal = await authenticator.authenticate(request)
                    if principal is None:
                        return unauthenticated_response()
                    request.state.principal = principal
                    tenant = principal_tenant(principal)
                    request.state.tenant = tenant
                    session_id = request.path_params.get("session_id")
                    if isinstance(session_id, str) and text_problem(session_id) is None:
                        owner = await tenant_of_session(session_id)
                        if owner is not None and owner != tenant:
                            return coded_error_response(
                                "state_session_not_found", SessionNotFoundError(session_id).message
                            )
                    if request.method in _BODY_METHODS:
                        refused = await read_limited_body(request, max_body_bytes)
                        if refused is not None:
                            return refused
                    refused = invalid_text_response(request)
                    if refused is not None:
                        return refused
                    return await handler(request)
                except Exception as exc:
                    if is_handled(exc):
                        raise
                    # Answered here rather than by Starlette's last-resort handler, which re-raises
                    # into the server after responding (and so logs every such error twice). An
                    # authenticate hook that raises lands here too: denied, never let through.
                    return await unexpected_error_response(request, exc)

            return guarded

    return GuardedRoute


__all__ = ["SessionTenantLookup", "guarded_route_class", "invalid_text_response", "read_limited_body"]
