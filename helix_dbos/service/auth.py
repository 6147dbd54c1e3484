"""Fail-closed authentication for the service.

The seeds' ``AgentServer`` throws at construction unless an ``authenticate`` hook or an explicit
``allowUnauthenticated: true`` is configured; :class:`Authenticator` does the same, and adds static
bearer tokens (``Authorization: Bearer <token>``) as a built-in scheme, because a shared secret per
client is what most deployments of a worker API start with.

A request is let in when a configured scheme accepts it: a bearer token that matches one of
``bearer_tokens``, or an ``authenticate(request)`` hook (sync or async) that returns a principal
(anything but ``None``). The principal is stored on ``request.state.principal`` for handlers and
hooks downstream. A hook that raises denies the request (the exception becomes a 500 response,
logged); it never lets it through.

Tokens are compared in constant time: both sides are hashed to a fixed length first (so the length
of a configured token does not leak either) and every configured token is compared, matched or not.

:func:`principal_scope` names a principal stably and without secrets, so that keys a client chooses
(``idempotency_key``) are its own: two clients using the same key never meet on one session.

**Tenants** (:mod:`helix_dbos.tenancy`): :func:`principal_tenant` says which tenant a principal acts
for. ``bearer_tokens`` given as a mapping ``{token: tenant}`` gives each token its tenant (a plain
list puts every token in the default tenant); an ``authenticate`` hook's principal names its tenant
with a ``tenant`` attribute or mapping key (a :class:`TenantPrincipal`, a dict, any object), and a
principal without one is the default tenant's. So a service configured as before has one tenant and
behaves as before.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from helix_dbos.errors import HelixError, ServiceAuthConfigError
from helix_dbos.tenancy import DEFAULT_TENANT, check_tenant

AuthenticateHook = Callable[[Request], Any | Awaitable[Any]]
"""``(request) -> principal | None``, sync or async; ``None`` means "not authenticated"."""


@dataclass(frozen=True)
class BearerPrincipal:
    """A request authenticated by a configured bearer token.

    Carries the token's position in ``bearer_tokens`` and a subject derived from it by a one-way
    hash, never the token, so logging a principal cannot leak a secret. The subject stays the same
    when the token list is reordered or grows, so what a client's keys name stays its own.
    """

    token_index: int
    subject: str = ""
    """16 hex digits of a hash of the token: stable per token, not reversible."""
    tenant: str = DEFAULT_TENANT
    """The tenant the token was configured with (``bearer_tokens={token: tenant}``)."""


@dataclass(frozen=True)
class TenantPrincipal:
    """What an ``authenticate`` hook may return to name the caller and its tenant.

    Any principal with a ``tenant`` attribute or key works the same; this one is ready-made.
    """

    subject: str
    """Who is calling (scopes the keys it chooses: :func:`principal_scope`)."""
    tenant: str
    """Whose sessions it sees and starts (:mod:`helix_dbos.tenancy`)."""


@dataclass(frozen=True)
class AnonymousPrincipal:
    """A request let in because the service was built with ``allow_unauthenticated=True``."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _subject(token: str) -> str:
    return hashlib.sha256(b"helix-dbos bearer subject\x00" + token.encode()).hexdigest()[:16]


class Authenticator:
    """Decides, for each request, who is calling or that nobody is (see the module docstring)."""

    def __init__(
        self,
        *,
        authenticate: AuthenticateHook | None = None,
        bearer_tokens: Iterable[str] | Mapping[str, str] | None = None,
        allow_unauthenticated: bool = False,
    ) -> None:
        tenant_of_token = (
            dict(bearer_tokens)
            if isinstance(bearer_tokens, Mapping)
            else dict.fromkeys(bearer_tokens or (), DEFAULT_TENANT)
        )
        tokens = list(tenant_of_token)
        for token in tokens:
            if not isinstance(token, str) or not token.strip() or token != token.strip():
                raise ServiceAuthConfigError("bearer_tokens must be non-empty strings without surrounding whitespace")
        for tenant in tenant_of_token.values():
            try:
                check_tenant(tenant)
            except HelixError as exc:
                raise ServiceAuthConfigError(f"bearer_tokens: {exc.message}") from None
        if authenticate is None and not tokens and not allow_unauthenticated:
            raise ServiceAuthConfigError(
                "Refusing to build an unauthenticated agent service: pass authenticate=(request -> principal | None) "
                "or bearer_tokens=[...], or allow_unauthenticated=True to serve without authentication on purpose"
            )
        if allow_unauthenticated and (authenticate is not None or tokens):
            raise ServiceAuthConfigError(
                "allow_unauthenticated=True contradicts the authenticate/bearer_tokens also given: choose one"
            )
        self._hook = authenticate
        self._token_digests = [_digest(token) for token in tokens]
        self._subjects = [_subject(token) for token in tokens]
        self._tenants = [tenant_of_token[token] for token in tokens]
        self.allow_unauthenticated = allow_unauthenticated

    @property
    def uses_bearer_tokens(self) -> bool:
        """Whether static bearer tokens are configured (the OpenAPI schema then documents the scheme)."""
        return bool(self._token_digests)

    def match_token(self, token: str) -> int | None:
        """Index of the configured token equal to ``token``, compared in constant time."""
        presented = _digest(token)
        matched: int | None = None
        for index, digest in enumerate(self._token_digests):
            if hmac.compare_digest(presented, digest) and matched is None:
                matched = index
        return matched

    async def authenticate(self, request: Request) -> Any | None:
        """The request's principal, or ``None`` when no configured scheme accepts it."""
        if self.allow_unauthenticated:
            return AnonymousPrincipal()
        if self._token_digests:
            token = bearer_token(request)
            if token is not None:
                index = self.match_token(token)
                if index is not None:
                    return BearerPrincipal(
                        token_index=index, subject=self._subjects[index], tenant=self._tenants[index]
                    )
        if self._hook is not None:
            principal = self._hook(request)
            if inspect.isawaitable(principal):
                principal = await principal
            return principal
        return None


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive), if any."""
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


_SUBJECT_ATTRIBUTES = ("subject", "sub", "principal_id", "user_id", "id")


def principal_scope(principal: Any) -> str:
    """A stable, secret-free name for the caller, to scope the keys it chooses.

    Bearer tokens scope by their subject; a hook's principal by its value when it is a string or
    an integer, else by its first ``subject``/``sub``/``principal_id``/``user_id``/``id`` attribute
    or mapping key, else by its ``repr`` when that is not the default one (which holds a memory
    address). Anything else, and unauthenticated services, share one scope. A principal of a
    tenant other than the default one is scoped within its tenant too, so two tenants' principals
    that share a subject never meet on one session.
    """
    scope = _scope(principal)
    tenant = principal_tenant(principal)
    return scope if tenant == DEFAULT_TENANT else f"tenant:{tenant}/{scope}"


def _scope(principal: Any) -> str:
    if isinstance(principal, BearerPrincipal):
        return f"bearer:{principal.subject or principal.token_index}"
    if principal is None or isinstance(principal, AnonymousPrincipal):
        return "anonymous"
    if isinstance(principal, str | int) and not isinstance(principal, bool):
        return f"principal:{principal}"
    for name in _SUBJECT_ATTRIBUTES:
        value = principal.get(name) if isinstance(principal, Mapping) else getattr(principal, name, None)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return f"principal:{value}"
    text = repr(principal)
    return "shared" if " object at 0x" in text else f"principal:{text}"


def principal_tenant(principal: Any) -> str:
    """The tenant ``principal`` acts for (module docstring); the default tenant when it names none.

    Raises :class:`ServiceAuthConfigError` when it names one that is not a valid tenant name: a bug
    of the ``authenticate`` hook, answered as a 500 (never as another tenant).
    """
    if isinstance(principal, BearerPrincipal):
        return principal.tenant
    if principal is None or isinstance(principal, AnonymousPrincipal | str | int):
        return DEFAULT_TENANT
    tenant = principal.get("tenant") if isinstance(principal, Mapping) else getattr(principal, "tenant", None)
    if tenant is None:
        return DEFAULT_TENANT
    try:
        return check_tenant(tenant)
    except HelixError as exc:
        raise ServiceAuthConfigError(f"the authenticate hook's principal names a bad tenant: {exc.message}") from None


__all__ = [
    "AnonymousPrincipal",
    "AuthenticateHook",
    "Authenticator",
    "BearerPrincipal",
    "TenantPrincipal",
    "bearer_token",
    "principal_scope",
    "principal_tenant",
]
