"""``HttpRemoteAgentTransport``: the remote sub-agent transport for a helix-dbos service, on :class:`HelixClient`."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from helix_dbos.client.http import HelixClient, SessionStatusView
from helix_dbos.remote_sub_agent import RemoteRunState, RemoteRunStatus, RemoteStreamEvent

__all__ = ["HttpRemoteAgentTransport"]


class HttpRemoteAgentTransport:
    """Reach agents served by ``helix-dbos serve`` at ``base_url`` with a bearer ``token``.

    ``start`` sends the remote session id as both ``session_id`` and ``idempotency_key``, so a
    repeated start (a parent step re-executed after a crash) returns the run the first one started.
    ``stream`` reconnects with ``Last-Event-ID`` for up to ``reconnect_timeout_seconds`` (a remote
    service restarting); past it the parent's wait step opens a new stream from its stored sequence.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_seconds: float = 30.0,
        reconnect_timeout_seconds: float = 60.0,
        http_transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._reconnect_timeout = reconnect_timeout_seconds
        self.client = HelixClient(base_url, token=token, timeout_seconds=timeout_seconds, transport=http_transport)

    def describe(self) -> str:
        return self.base_url

    def start(self, agent: str, message: str, session_id: str) -> str:
        return self.client.start(agent, message, session_id=session_id, idempotency_key=session_id).run_id

    def stream(self, session_id: str, *, after_sequence: int) -> Iterator[RemoteStreamEvent]:
        events = self.client.stream(
            session_id, after=after_sequence or None, reconnect_timeout_seconds=self._reconnect_timeout
        )
        for event in events:
            yield RemoteStreamEvent(event=event.event, data=event.data, sequence=event.id)

    def get_status(self, session_id: str) -> RemoteRunStatus:
        view = self.client.status(session_id)
        return RemoteRunStatus(
            session_id=view.session_id,
            status=_state(view),
            output=view.output,
            error=view.error,
            aborted=view.aborted,
            awaiting_client_tool=view.awaiting_client_tool,
        )

    def interrupt(self, session_id: str, reason: str) -> None:
        self.client.interrupt(session_id, reason)

    def abort(self, session_id: str, reason: str) -> None:
        self.client.abort(session_id, reason)

    def close(self) -> None:
        self.client.close()


def _state(view: SessionStatusView) -> RemoteRunState:
    """The remote run's state from the session snapshot (a session is ``active`` while it runs or waits)."""
    if view.status == "active":
        return "suspended" if view.run_status == "suspended" or view.pending_tool_calls else "running"
    if view.status == "paused":
        return "suspended"
    if view.status in ("completed", "failed", "interrupted"):
        return view.status  # type: ignore[return-value]
    return "running"
