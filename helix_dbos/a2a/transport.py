"""``A2ARemoteAgentTransport``: a remote sub-agent that is an A2A agent (JSON-RPC, protocol 1.0).

It implements :class:`~helix_dbos.remote_sub_agent.RemoteAgentTransport`, so the delegation is
the existing remote sub-agent machinery (:mod:`helix_dbos.runtime.remote_sub_agents`): the start
and the wait are durable steps, the remote session id derives from the parent's session and tool
call, and a replayed parent reads the recorded outputs instead of calling again. What is A2A here:

- ``start`` sends ``SendMessage`` with ``returnImmediately``, the remote session id as the
  ``contextId`` and a message id derived from it (``helix-{session id}``): a start step
  re-executed after a crash sends the *same* message, which a helix A2A server answers with the
  task it already started (the message id is its idempotency key);
- ``get_status`` reads the task (``GetTask``; after a restart the task is found again by its
  context with ``ListTasks``): ``input-required`` reads as a run waiting for a client, which the
  parent cannot answer across the boundary, so the call fails (``client-tool-unsupported``);
- ``stream`` follows the task (``SubscribeToTask``) and hands its text artifacts to the parent's
  stream as ``text_delta`` chunks;
- ``interrupt`` and ``abort`` both cancel the task (``CancelTask``): A2A has no softer stop.

Only ``httpx`` is needed (the ``client`` extra): the protocol is plain JSON over HTTP, and the
server side's SDK is not imported here.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

from helix_dbos.errors import ServiceResponseError, ServiceUnavailableError
from helix_dbos.remote_sub_agent import RemoteRunStatus, RemoteStreamEvent

A2A_VERSION = "1.0"
"""The protocol version this transport speaks (sent as the ``A2A-Version`` header)."""
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
_RUNNING = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_UNSPECIFIED", ""})
_WAITING = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
_OUTPUT_ARTIFACT = "output"


class A2AResponseError(ServiceResponseError):
    """The A2A agent answered a request with a JSON-RPC error (``a2a_code`` is its code)."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.a2a_code = int(error.get("code", 0))
        message = str(error.get("message", "error"))
        super().__init__(
            f"A2A {method}: {self.a2a_code} {message}",
            status=200,
            service_code=f"a2a_{abs(self.a2a_code)}",
            retryable=self.a2a_code == -32603,
        )


def message_id_for(session_id: str) -> str:
    """The message a delegation sends: one per remote session, the same on every re-send."""
    return f"helix-{session_id}"


class A2ARemoteAgentTransport:
    """Reach the A2A agent whose JSON-RPC endpoint is ``url`` (for a helix service: ``{base}/a2a/{agent}``).

    ``token`` is sent as ``Authorization: Bearer``; ``headers`` adds any others. ``agent_type``
    names the agent on the chunks proxied into the parent's stream (default: the last segment of
    ``url``).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_seconds: float = 30.0,
        agent_type: str | None = None,
        http_transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        sent = {"A2A-Version": A2A_VERSION, **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        self.agent_type = agent_type or self.url.rsplit("/", 1)[-1]
        self._http = httpx.Client(headers=sent, timeout=timeout_seconds, transport=http_transport)
        self._tasks: dict[str, str] = {}

    def describe(self) -> str:
        return self.url

    def close(self) -> None:
        self._http.close()

    # -- JSON-RPC ------------------------------------------------------------------------------------------
    def _rpc(self, method: str, params: dict[str, Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        try:
            response = self._http.post(self.url, json=body)
        except httpx.TransportError as exc:
            raise _unreachable(method, self.url, exc) from exc
        if response.status_code != 200:
            raise _http_error(method, response)
        answer = response.json()
        if "error" in answer:
            raise A2AResponseError(method, answer["error"])
        return answer.get("result")

    # -- RemoteAgentTransport ------------------------------------------------------------------------------
    def start(self, agent: str, message: str, session_id: str) -> str:
        params = {
            "message": {
                "messageId": message_id_for(session_id),
                "contextId": session_id,
                "role": "ROLE_USER",
                "parts": [{"text": message}],
            },
            "configuration": {"returnImmediately": True},
        }
        result = self._rpc("SendMessage", params) or {}
        if "task" not in result:
            raise ServiceResponseError(
                "A2A SendMessage: the agent answered with a message, not a task", status=200, service_code="a2a_no_task"
            )
        task_id = str(result["task"]["id"])
        self._tasks[session_id] = task_id
        return task_id

    def _task_id(self, session_id: str) -> str:
        known = self._tasks.get(session_id)
        if known is not None:
            return known
        listed = self._rpc("ListTasks", {"contextId": session_id}) or {}
        tasks = listed.get("tasks") or []
        if not tasks:
            raise A2AResponseError("ListTasks", {"code": TASK_NOT_FOUND, "message": f"no task in {session_id!r}"})
        self._tasks[session_id] = str(tasks[0]["id"])  # newest first
        return self._tasks[session_id]

    def get_status(self, session_id: str) -> RemoteRunStatus:
        task = self._rpc("GetTask", {"id": self._task_id(session_id)}) or {}
        return task_status(session_id, task)

    def stream(self, session_id: str, *, after_sequence: int) -> Iterator[RemoteStreamEvent]:
        params = {"id": self._task_id(session_id)}
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": "SubscribeToTask", "params": params}
        sequence = after_sequence
        proxied_text = False
        try:
            with self._http.stream("POST", self.url, json=body, timeout=httpx.Timeout(None, connect=10)) as response:
                if response.status_code != 200:
                    raise _http_error("SubscribeToTask", response)
                for data in _sse_data(response.iter_lines()):
                    answer = json.loads(data)
                    if "error" in answer:
                        if int(answer["error"].get("code", 0)) in (TASK_NOT_FOUND, -32004, -32601):
                            time.sleep(1.0)  # ended or not subscribable: the status poll reads the outcome
                            return
                        raise A2AResponseError("SubscribeToTask", answer["error"])
                    result = answer.get("result") or {}
                    update = result.get("artifactUpdate")
                    if update is not None:
                        artifact = update.get("artifact") or {}
                        if artifact.get("artifactId") == _OUTPUT_ARTIFACT and proxied_text:
                            continue  # the whole answer again, after its deltas
                        for text in _texts(artifact.get("parts")):
                            sequence += 1
                            proxied_text = True
                            chunk = {"type": "text_delta", "agent_id": session_id, "agent_type": self.agent_type}
                            yield RemoteStreamEvent(event="chunk", data={**chunk, "content": text}, sequence=sequence)
                    status = (result.get("statusUpdate") or result.get("task") or {}).get("status") or {}
                    if status.get("state") and status.get("state") not in _RUNNING:
                        yield RemoteStreamEvent(event="end", data={"type": "end"})
                        return
        except httpx.TransportError as exc:
            raise _unreachable("SubscribeToTask", self.url, exc) from exc

    def _cancel(self, session_id: str) -> None:
        try:
            self._rpc("CancelTask", {"id": self._task_id(session_id)})
        except A2AResponseError as exc:
            if exc.a2a_code not in (TASK_NOT_CANCELABLE, TASK_NOT_FOUND):
                raise

    def interrupt(self, session_id: str, reason: str) -> None:
        self._cancel(session_id)

    def abort(self, session_id: str, reason: str) -> None:
        self._cancel(session_id)


def task_status(session_id: str, task: dict[str, Any]) -> RemoteRunStatus:
    """An A2A task (its JSON) as the remote run's status."""
    status = task.get("status") or {}
    state = str(status.get("state", ""))
    said = "\n".join(_texts((status.get("message") or {}).get("parts")))
    if state in _RUNNING:
        return RemoteRunStatus(session_id=session_id, status="running")
    if state in _WAITING:
        return RemoteRunStatus(session_id=session_id, status="suspended", awaiting_client_tool=True, error=said or None)
    if state == "TASK_STATE_COMPLETED":
        return RemoteRunStatus(session_id=session_id, status="completed", output=task_output(task, said))
    if state == "TASK_STATE_CANCELED":
        return RemoteRunStatus(
            session_id=session_id, status="failed", aborted=True, error=said or "the task was canceled"
        )
    return RemoteRunStatus(session_id=session_id, status="failed", error=said or f"the task ended {state}")


def task_output(task: dict[str, Any], fallback: str) -> Any:
    """A completed task's answer: the ``output`` artifact's, else every artifact's text, else ``fallback``."""
    artifacts = task.get("artifacts") or []
    chosen = [a for a in artifacts if a.get("artifactId") == _OUTPUT_ARTIFACT] or artifacts
    for artifact in chosen:
        for part in artifact.get("parts") or []:
            if "data" in part:
                return integral_numbers(part["data"])
    texts = [text for artifact in chosen for text in _texts(artifact.get("parts"))]
    return "".join(texts) if texts else fallback


def integral_numbers(value: Any) -> Any:
    """Whole numbers back as integers: A2A data parts are protobuf ``Struct``s, whose numbers are doubles."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_numbers(v) for v in value]
    return value


def _texts(parts: Any) -> list[str]:
    return [str(p["text"]) for p in parts or [] if isinstance(p, dict) and p.get("text")]


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The ``data`` of each server-sent event (comments and other fields skipped)."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)


def _unreachable(method: str, url: str, exc: Exception) -> ServiceUnavailableError:
    return ServiceUnavailableError(
        f"A2A {method} {url}: no answer ({type(exc).__name__}: {exc})",
        status=0,
        service_code="transport_error",
        retryable=True,
    )


def _http_error(method: str, response: httpx.Response) -> ServiceResponseError:
    status = response.status_code
    cls = ServiceUnavailableError if status == 408 or status >= 500 else ServiceResponseError
    return cls(f"A2A {method}: HTTP {status}", status=status, service_code=f"http_{status}")


__all__ = ["A2A_VERSION", "A2ARemoteAgentTransport", "A2AResponseError", "message_id_for", "task_output", "task_status"]
