"""The durable agent service: HTTP + SSE over a :class:`~helix_dbos.runtime.executor.DBOSAgentExecutor`.

``create_app(executor, bearer_tokens=[...])`` returns a FastAPI app; ``helix-dbos serve`` launches
helix-dbos and serves it with uvicorn. See :mod:`helix_dbos.service.app` for how the app is
assembled and :mod:`helix_dbos.service.routes` for the routes and the seeds' ``AgentServer``
operations they implement.

FastAPI, sse-starlette and uvicorn are the ``server`` extra: the core (``import helix_dbos``) never
imports them, and importing this package without them fails at once with the install hint rather
than deep inside a route module.
"""

SERVER_INSTALL_HINT = "pip install 'helix-dbos[server]'"
"""How to get the service's dependencies, named in the error raised when they are missing."""

try:
    import fastapi  # noqa: F401
    import sse_starlette  # noqa: F401
except ImportError as exc:
    # A ModuleNotFoundError carrying the missing module's name: the CLI turns it into its one-line hint.
    raise ModuleNotFoundError(
        f"helix_dbos.service needs FastAPI and sse-starlette ({exc.name} is not installed): {SERVER_INSTALL_HINT}",
        name=exc.name,
    ) from exc

from helix_dbos.errors import ServiceAuthConfigError  # noqa: E402
from helix_dbos.service.app import create_app  # noqa: E402
from helix_dbos.service.auth import (  # noqa: E402
    AnonymousPrincipal,
    AuthenticateHook,
    BearerPrincipal,
    TenantPrincipal,
)

__all__ = [
    "SERVER_INSTALL_HINT",
    "AnonymousPrincipal",
    "AuthenticateHook",
    "BearerPrincipal",
    "ServiceAuthConfigError",
    "TenantPrincipal",
    "create_app",
]
