"""``HelixClient``: start runs, stream sessions (resuming with ``Last-Event-ID``), answer, control, read.

One method per service route a client needs. Every error answer becomes a
:class:`~helix_dbos.errors.ServiceResponseError` subclass chosen by its HTTP status (see
:func:`service_error`); a connection that could not be made is a
:class:`~helix_dbos.errors.ServiceUnavailableError` (``status`` 0).

Streams are the service's server-sent events (``chunk`` events carry the stream sequence as their
``id``). :meth:`HelixClient.stream` keeps the last id it yielded and, when the connection drops
before the stream's ``end`` or ``fail``, reconnects with ``Last-Event-ID`` so every chunk arrives
exactly once, for up to ``reconnect_timeout_seconds`` of consecutive failures. A ``truncated``
event (chunks removed by crash recovery) is yielded, then the stream continues after its last valid
sequence, as the service asks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from helix_dbos.errors import (
    ServiceConflictError,
    ServiceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
    ServiceUnauthorizedError,
    ServiceUnavailableError,
)
from helix_dbos.stream.events import StreamEvent, parse_stream_event

__all__ = ["HelixClient", "RunAccepted", "RunResult", "ServerEvent", "SessionStatusView", "service_error"]

_TERMINAL_EVENTS = ("end", "fail")


class _View(BaseModel):
    # A newer service may add fields: a client must keep working against it.
    model_config = ConfigDict(extra="ignore")


class RunAccepted(_View):
    """``POST /v1/runs`` answered: the run (new, or the one an identical request started)."""

    session_id: str
    run_id: str
    status: str
    stream_url: str
    double_text: dict[str, Any] | None = None
    """What became of the input: ``{policy, status, run_id, position, ticket_id}`` (``docs/double-texting.md``)."""


class RunResult(_View):
    """``GET /v1/sessions/{id}/result``: the current run's result."""

    session_id: str
    run_id: str
    status: str
    """``completed``, ``failed``, ``interrupted``, ``suspended_client_tool`` or ``suspended_awaiting_children``."""
    output: Any = None
    error: str | None = None
    aborted: bool = False
    abort_reason: str | None = None


class SessionStatusView(_View):
    """``GET /v1/sessions/{id}``: the parts of the session snapshot a client decides on."""

    session_id: str
    agent: str
    status: str
    """The stored session status: ``active`` (running or waiting), ``completed``, ``failed``, ``interrupted``."""
    output: Any = None
    error: str | None = None
    aborted: bool = False
    current_run: dict[str, Any] | None = None
    pending_tool_calls: list[dict[str, Any]] = []
    awaiting_client_tool: bool = False
    """The run waits for the result of a client-executed tool."""
    stream: dict[str, Any] | None = None

    @property
    def run_status(self) -> str | None:
        """The current run's status (``running``, ``suspended``, ``completed``, ...), if there is a run."""
        return None if self.current_run is None else str(self.current_run.get("status"))


@dataclass(frozen=True)
class ServerEvent:
    """One server-sent event of a session stream."""

    event: str
    """``chunk``, ``status``, ``end``, ``fail`` or ``truncated``."""
    data: dict[str, Any] = field(default_factory=dict)
    """The event's JSON data (a chunk's JSON for ``chunk``)."""
    id: int | None = None
    """The stream sequence of a ``chunk`` event (its SSE ``id``); ``None`` for control events."""
    typed: StreamEvent | None = field(default=None, compare=False, repr=False)
    """The same event as the toolkit's wire model (``helix_dbos.stream.events``), which the service
    itself serializes with: parsing every event through it makes a protocol drift fail here, loudly."""


def _parse_sse(lines: Iterable[str]) -> Iterator[ServerEvent]:
    """The events of a ``text/event-stream`` body, given line by line (comments and pings skipped)."""
    event, data, event_id = "message", "", None
    for line in lines:
        if line == "":
            if data:
                typed = parse_stream_event(data, event=event, id=event_id)
                yield ServerEvent(
                    event=event, data=json.loads(data), id=int(event_id) if event_id else None, typed=typed
                )
            event, data, event_id = "message", "", None
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data = f"{data}\n{value}" if data else value
            elif name == "id":
                event_id = value


def service_error(response: httpx.Response) -> ServiceResponseError:
    """The exception for an error answer of the service, by HTTP status (the body's code is kept)."""
    try:
        body = response.json()
        info = body.get("error", {}) if isinstance(body, dict) else {}
    except ValueError:
        info = {}
    status = response.status_code
    code = str(info.get("code") or f"http_{status}")
    message = str(info.get("message") or response.reason_phrase or f"HTTP {status}")
    text = f"{response.request.method} {response.request.url.path}: {status} {code}: {message}"
    retryable = info.get("retryable")
    cls: type[ServiceResponseError]
    if status == 401:
        cls = ServiceUnauthorizedError
    elif status == 404:
        cls = ServiceNotFoundError
    elif status == 409:
        cls = ServiceConflictError
    elif status == 408 or status >= 500:
        cls, retryable = ServiceUnavailableError, True if retryable is None else retryable
    else:
        cls = ServiceRequestError
    return cls(text, status=status, service_code=code, retryable=bool(retryable) if retryable is not None else None)


def _unreachable(method: str, url: str, exc: Exception) -> ServiceUnavailableError:
    return ServiceUnavailableError(
        f"{method} {url}: no answer from the service ({type(exc).__name__}: {exc})",
        status=0,
        service_code="transport_error",
        retryable=True,
    )


class HelixClient:
    """A synchronous client for one helix-dbos service (thread-safe: httpx's client is).

    ``token`` is sent as ``Authorization: Bearer <token>``; ``timeout_seconds`` bounds each request
    (a stream's reads wait up to ``read_timeout_seconds``: longer than the service's ping interval).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_seconds: float = 30.0,
        read_timeout_seconds: float = 60.0,
        reconnect_delay_seconds: float = 0.25,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._read_timeout = read_timeout_seconds
        self._timeout = timeout_seconds
        self._delay = reconnect_delay_seconds
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_seconds, transport=transport)

    def __enter__(self) -> HelixClient:
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- requests ----------------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _unreachable(method, path, exc) from exc
        if response.status_code >= 400:
            raise service_error(response)
        return response.json()

    def start(
        self,
        agent: str,
        input: str | dict[str, Any],
        *,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        double_text: str | None = None,
    ) -> RunAccepted:
        """Start a run of ``agent`` (``POST /v1/runs``): a new session, or the next turn of a completed one.

        With ``idempotency_key`` a repeat (a retry after a lost answer) returns the same run.
        ``double_text``: what the input does if the session's run is still in flight (``reject``,
        ``enqueue``, ``interrupt``, ``rollback``, ``steer``; default: the agent's policy).
        """
        body: dict[str, Any] = {"agent": agent, "input": input}
        if session_id is not None:
            body["session_id"] = session_id
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if double_text is not None:
            body["double_text"] = double_text
        return RunAccepted.model_validate(self._request("POST", "/v1/runs", json=body))

    def status(self, session_id: str) -> SessionStatusView:
        """The session's snapshot (``GET /v1/sessions/{id}``)."""
        return SessionStatusView.model_validate(self._request("GET", f"/v1/sessions/{session_id}"))

    def result(self, session_id: str, *, timeout_seconds: float = 30.0) -> RunResult:
        """The current run's result, waiting up to ``timeout_seconds`` (408: :class:`ServiceUnavailableError`)."""
        params = {"timeout_seconds": timeout_seconds}
        timeout = httpx.Timeout(self._timeout + timeout_seconds)
        data = self._request("GET", f"/v1/sessions/{session_id}/result", params=params, timeout=timeout)
        return RunResult.model_validate(data)

    def submit_tool_result(self, session_id: str, submission: dict[str, Any]) -> dict[str, Any]:
        """Answer a pending call: ``{"kind": "client-tool-result", "tool_call_id", "result"}`` or an approval."""
        data: dict[str, Any] = self._request("POST", f"/v1/sessions/{session_id}/tool-results", json=submission)
        return data

    def interrupt(self, session_id: str, reason: str | None = None) -> bool:
        """Ask the run to stop at its next step (it stays resumable); False when no run was in flight."""
        data = self._request("POST", f"/v1/sessions/{session_id}/interrupt", json={"reason": reason})
        return bool(data.get("requested"))

    def abort(self, session_id: str, reason: str | None = None) -> None:
        """Stop the run now; the session ends ``failed``."""
        self._request("POST", f"/v1/sessions/{session_id}/abort", json={"reason": reason})

    # --- streams -----------------------------------------------------------------------------------

    def stream(
        self,
        session_id: str,
        *,
        after: int | None = None,
        reconnect_timeout_seconds: float | None = 30.0,
    ) -> Iterator[ServerEvent]:
        """The session's events, from the start or after sequence ``after``, until ``end`` or ``fail``.

        A dropped connection (or a 5xx while reconnecting) is retried with ``Last-Event-ID`` for up
        to ``reconnect_timeout_seconds`` of consecutive failures (``None``: forever), then
        :class:`ServiceUnavailableError`. 4xx answers raise at once.
        """
        last = after
        failing_since: float | None = None
        path = f"/v1/sessions/{session_id}/stream"
        timeout = httpx.Timeout(self._timeout, read=self._read_timeout)
        while True:
            headers = {"Last-Event-ID": str(last)} if last is not None else {}
            try:
                with self._http.stream("GET", path, headers=headers, timeout=timeout) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise service_error(response)
                    failing_since = None
                    for event in _parse_sse(response.iter_lines()):
                        if event.id is not None:
                            last = event.id
                        yield event
                        if event.event in _TERMINAL_EVENTS:
                            return
                        if event.event == "truncated":
                            valid = event.data.get(
                                "lastValidSequence"
                            )  # resume after it (``atSequence`` is the old high-water mark)
                            last = int(valid) if valid is not None else last
                            break
            except (httpx.TransportError, ServiceUnavailableError) as exc:
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                if reconnect_timeout_seconds is not None and now - failing_since > reconnect_timeout_seconds:
                    if isinstance(exc, ServiceUnavailableError):
                        raise
                    raise _unreachable("GET", path, exc) from exc
            time.sleep(self._delay)  # the connection ended before the stream did: reconnect
