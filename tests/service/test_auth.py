"""Fail-closed authentication, without a database: every request here is denied before the executor."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.requests import Request

from helix_dbos.errors import ServiceAuthConfigError
from helix_dbos.service import AnonymousPrincipal, BearerPrincipal, create_app
from helix_dbos.service.auth import Authenticator


class UntouchableExecutor:
    """Any attribute access fails the test: denied requests must not reach the executor."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the executor was used ({name}) by a request that should have been denied")


def app_with(**kwargs: Any) -> Any:
    return create_app(UntouchableExecutor(), **kwargs)  # type: ignore[arg-type]


def test_create_app_refuses_to_build_without_an_auth_decision() -> None:
    with pytest.raises(ServiceAuthConfigError, match="allow_unauthenticated=True"):
        app_with()
    with pytest.raises(ServiceAuthConfigError):
        app_with(bearer_tokens=[])  # an empty list is no decision either
    with pytest.raises(ServiceAuthConfigError, match="non-empty"):
        app_with(bearer_tokens=[""])
    with pytest.raises(ServiceAuthConfigError, match="non-empty"):
        app_with(bearer_tokens=[" padded "])
    with pytest.raises(ServiceAuthConfigError, match="contradicts"):
        app_with(bearer_tokens=["t"], allow_unauthenticated=True)
    with pytest.raises(ValueError):  # it is also a ValueError, for callers that catch those
        app_with(allow_unauthenticated=False)
    assert app_with(allow_unauthenticated=True) is not None


def test_token_matching() -> None:
    auth = Authenticator(bearer_tokens=["alpha", "beta"])
    assert auth.match_token("alpha") == 0
    assert auth.match_token("beta") == 1
    for wrong in ("", "alph", "alpha ", "ALPHA", "gamma", "alphaalpha"):
        assert auth.match_token(wrong) is None


def anonymous_client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service")


async def test_sync_hook_denies_with_401_and_never_touches_the_executor() -> None:
    calls: list[str] = []

    def authenticate(request: Request) -> None:
        calls.append(request.url.path)
        return None

    async with anonymous_client(app_with(authenticate=authenticate)) as http:
        response = await http.post("/v1/runs", json={"agent": "a", "input": "x"})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthenticated"
        assert (await http.get("/healthz")).status_code == 200
    assert calls == ["/v1/runs"]


async def test_a_hook_that_raises_denies_with_500() -> None:
    def authenticate(request: Request) -> object:
        raise ConnectionError("identity provider down")

    async with anonymous_client(app_with(authenticate=authenticate)) as http:
        response = await http.get("/v1/sessions/s")
    assert response.status_code == 500
    assert response.json()["error"] == {
        "code": "framework_internal_error",
        "message": "Internal server error",
        "retryable": False,
    }


async def test_bearer_tokens_and_hook_together() -> None:
    async def authenticate(request: Request) -> str | None:
        return "cookie-user" if request.cookies.get("session") == "ok" else None

    auth = Authenticator(authenticate=authenticate, bearer_tokens=["tok"])

    def request(headers: dict[str, str]) -> Request:
        raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        return Request({"type": "http", "method": "GET", "path": "/", "headers": raw, "query_string": b""})

    principal = await auth.authenticate(request({"Authorization": "Bearer tok"}))
    assert isinstance(principal, BearerPrincipal) and principal.token_index == 0
    assert len(principal.subject) == 16 and "tok" not in principal.subject
    assert await auth.authenticate(request({"Cookie": "session=ok"})) == "cookie-user"
    assert await auth.authenticate(request({"Authorization": "Bearer bad"})) is None
    open_auth = Authenticator(allow_unauthenticated=True)
    assert await open_auth.authenticate(request({})) == AnonymousPrincipal()


async def test_oversized_bodies_are_413_after_authentication() -> None:
    app = app_with(bearer_tokens=["tok"], max_body_bytes=64)
    big = b'{"agent": "a", "input": "' + b"x" * 100 + b'"}'
    json_type = {"Content-Type": "application/json"}
    async with anonymous_client(app) as http:
        assert (await http.post("/v1/runs", content=big, headers=json_type)).status_code == 401
        response = await http.post("/v1/runs", content=big, headers=json_type | {"Authorization": "Bearer tok"})
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "validation_body_too_large"
