"""The durable agent service: HTTP + SSE over a :class:`~helix_dbos.runtime.executor.DBOSAgentExecutor`.

``create_app(executor, bearer_tokens=[...])`` returns a FastAPI app; ``helix-dbos serve`` launches
helix-dbos and serves it with uvicorn. See :mod:`helix_dbos.service.app` for the routes and how
they map to the seeds' ``AgentServer`` operations.
"""

from helix_dbos.errors import ServiceAuthConfigError
from helix_dbos.service.app import create_app
from helix_dbos.service.auth import AnonymousPrincipal, AuthenticateHook, BearerPrincipal

__all__ = ["AnonymousPrincipal", "AuthenticateHook", "BearerPrincipal", "ServiceAuthConfigError", "create_app"]
