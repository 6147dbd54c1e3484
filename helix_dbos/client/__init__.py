"""A small Python client for a helix-dbos service (``helix-dbos serve``), on httpx.

::

    from helix_dbos.client import HelixClient

    with HelixClient("http://127.0.0.1:8000", token="...") as client:
        started = client.start("assistant", "Hello!")
        for event in client.stream(started.session_id):   # resumes by itself after a dropped connection
            if event.event == "chunk":
                print(event.data["type"])
        print(client.result(started.session_id).output)

Errors map the service's error codes to :class:`~helix_dbos.errors.ServiceResponseError` subclasses
(401 unauthorized, 404 not found, 409 conflict, 4xx request, 408/5xx/no answer unavailable).
:class:`HttpRemoteAgentTransport` is the remote sub-agent transport built on it
(:func:`helix_dbos.create_remote_sub_agent_tool`).

httpx is the ``client`` extra: the core never imports this package, and importing it without httpx
fails at once with the install hint.
"""

CLIENT_INSTALL_HINT = "pip install 'helix-dbos[client]'"
"""How to get the client's dependency, named in the error raised when it is missing."""

try:
    import httpx  # noqa: F401
except ImportError as exc:
    raise ModuleNotFoundError(
        f"helix_dbos.client needs httpx ({exc.name} is not installed): {CLIENT_INSTALL_HINT}", name=exc.name
    ) from exc

from helix_dbos.client.http import HelixClient, RunAccepted, RunResult, ServerEvent, SessionStatusView  # noqa: E402
from helix_dbos.client.transport import HttpRemoteAgentTransport  # noqa: E402

__all__ = [
    "CLIENT_INSTALL_HINT",
    "HelixClient",
    "HttpRemoteAgentTransport",
    "RunAccepted",
    "RunResult",
    "ServerEvent",
    "SessionStatusView",
]
