"""A scripted, OpenAI-compatible chat-completions server for tests, on 127.0.0.1 only.

It exists so tests can drive the *real* LiteLLM adapter (HTTP, SSE parsing, error mapping, retries)
without a provider or the network. Each request to ``POST /v1/chat/completions`` consumes the next
:class:`ScriptedResponse`: a text reply, tool calls, reasoning, an HTTP error with headers, a delay,
paced chunks, a dropped connection or broken tool-call JSON. Request bodies are recorded so tests
can assert what was sent::

    with ScriptedOpenAIServer([{"text": "Hello!"}]) as server:
        config = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test")
        ...
        assert server.requests[0]["messages"][-1]["content"] == "Hi"

Standard library only (``http.server`` + threads), so it can ship in ``helix_dbos.testing`` and be
used by applications' own test suites.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["ScriptedOpenAIServer", "ScriptedResponse", "ScriptedToolCall"]

_MODEL_ID = "fake"


@dataclass
class ScriptedToolCall:
    """One tool call a scripted response returns."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    """The tool-call id; ``call_<n>`` (numbered across the server's lifetime) when omitted."""
    raw_arguments: str | None = None
    """Send this string verbatim instead of ``json.dumps(arguments)`` (e.g. broken JSON)."""


ToolCallSpec = ScriptedToolCall | tuple[str, Mapping[str, Any]] | Mapping[str, Any]


@dataclass
class ScriptedResponse:
    """What the server answers to one chat-completions request.

    ``tool_calls`` entries may be :class:`ScriptedToolCall`, ``(name, arguments)`` tuples, or dicts
    with ``name``, ``arguments`` and optionally ``id`` / ``raw_arguments``.
    """

    text: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    reasoning: str | None = None
    """Sent as ``reasoning_content`` (the vLLM / DeepSeek convention LiteLLM understands)."""
    finish_reason: str | None = None
    """Defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``."""
    status: int = 200
    """A non-200 status sends an OpenAI-style error body instead of a completion."""
    error_message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers, e.g. ``{"Retry-After": "0"}``."""
    delay_seconds: float = 0.0
    """Wait this long before answering (to provoke client timeouts)."""
    chunk_delay_seconds: float = 0.0
    """Pause between stream chunks."""
    drop_after_chunks: int | None = None
    """Close the connection after this many stream chunks, without ``finish_reason`` or ``[DONE]``."""
    raw_arguments: str | None = None
    """Shortcut: send this string as the first tool call's arguments."""
    usage: dict[str, Any] | None = None
    """The ``usage`` object; defaults to small fixed counts."""

    @classmethod
    def coerce(cls, value: ScriptedResponse | Mapping[str, Any]) -> ScriptedResponse:
        """Accept a :class:`ScriptedResponse` or a dict of its fields."""
        if isinstance(value, ScriptedResponse):
            return value
        return cls(**dict(value))


ScriptItem = ScriptedResponse | Mapping[str, Any]
Handler = Callable[[dict[str, Any]], ScriptItem]


class ScriptedOpenAIServer:
    """An OpenAI-compatible server answering from a script; thread-safe, concurrent, loopback-only.

    Responses are consumed in order. When the script is exhausted, ``handler`` (if given) is called
    with the request body to produce the response; without one, the server answers ``500`` with a
    message saying the script ran out, so an unexpected extra LLM call fails loudly.

    ``rate_limit_per_second``: behave like a provider's quota, answering ``429`` (``Retry-After:
    1``, consuming nothing) to a request when that many were served in the second before it;
    :attr:`arrival_times` and :attr:`rejected_count` tell what it saw.
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] | None = None,
        *,
        handler: Handler | None = None,
        rate_limit_per_second: int | None = None,
        max_request_bytes: int | None = None,
    ) -> None:
        """A server answering from ``script``, then from ``handler``.

        ``max_request_bytes``: a context window, in request-body bytes. A larger request is
        refused like a provider refuses one over its window (400, ``context_length_exceeded``),
        without consuming a scripted response; its body is in :attr:`over_window`, not
        :attr:`requests`.
        """
        self._lock = threading.Lock()
        self._rate_limit = rate_limit_per_second
        self._arrivals: list[float] = []
        self._served: list[float] = []
        self._rejected = 0
        self.max_request_bytes = max_request_bytes
        self._over_window: list[dict[str, Any]] = []
        self._script: list[ScriptedResponse] = [ScriptedResponse.coerce(s) for s in script or ()]
        self._handler = handler
        self._requests: list[dict[str, Any]] = []
        self._request_headers: list[dict[str, str]] = []
        self._request_times: list[float] = []
        self._tool_call_counter = 0
        self._usage_sent: list[dict[str, Any]] = []
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, port: int = 0) -> str:
        """Start serving on ``127.0.0.1:port`` (0 picks a free port) and return the base URL."""
        if self._httpd is not None:
            return self.base_url
        httpd = ThreadingHTTPServer(("127.0.0.1", port), _make_request_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving; in-flight delayed responses are woken and abandoned."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedOpenAIServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedOpenAIServer is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: pass it as ``api_base``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script and records ----------------------------------------------------------------------

    def add(self, *responses: ScriptItem) -> None:
        """Append responses to the script."""
        with self._lock:
            self._script.extend(ScriptedResponse.coerce(r) for r in responses)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the JSON bodies received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """HTTP headers of each recorded request (names lower-cased), parallel to :attr:`requests`."""
        with self._lock:
            return [dict(h) for h in self._request_headers]

    @property
    def request_times(self) -> list[float]:
        """When each recorded request arrived (``time.time()``), parallel to :attr:`requests`.

        Measure a client's waits between attempts from these, on the server's side.
        """
        with self._lock:
            return list(self._request_times)

    @property
    def request_count(self) -> int:
        """How many chat-completions requests arrived (including ones answered with errors)."""
        with self._lock:
            return len(self._requests)

    @property
    def usage_sent(self) -> list[dict[str, Any]]:
        """The ``usage`` objects of the responses actually written to a client, in order.

        What a provider would have billed: a response dropped before its usage, or abandoned when
        the server stopped, is not in it. Sum it to check a run's token accounting.
        """
        with self._lock:
            return [dict(u) for u in self._usage_sent]

    def _record_usage(self, usage: dict[str, Any]) -> None:
        with self._lock:
            self._usage_sent.append(dict(usage))

    @property
    def over_window(self) -> list[dict[str, Any]]:
        """Bodies of the requests refused for exceeding ``max_request_bytes``, in arrival order."""
        with self._lock:
            return list(self._over_window)

    def _reject_if_too_large(self, body: dict[str, Any], size: int) -> bool:
        if self.max_request_bytes is None or size <= self.max_request_bytes:
            return False
        with self._lock:
            self._over_window.append(body)
        return True

    @property
    def remaining(self) -> int:
        """Scripted responses not consumed yet."""
        with self._lock:
            return len(self._script)

    @property
    def arrival_times(self) -> list[float]:
        """When each chat-completions request arrived (``time.time()``, the server's clock), in order."""
        with self._lock:
            return list(self._arrivals)

    @property
    def rejected_count(self) -> int:
        """Requests answered ``429`` by the ``rate_limit_per_second`` mode."""
        with self._lock:
            return self._rejected

    def _over_rate_limit(self, now: float) -> bool:
        """Rate-limit mode: ``rate_limit_per_second`` requests were already served in the last second.

        Served ones only, as providers count a quota: a rejected request does not use it up.
        """
        if self._rate_limit is None:
            return False
        served = sum(1 for t in self._served if t > now - 1.0)
        if served >= self._rate_limit:
            return True
        self._served.append(now)
        return False

    def _next_response(self, body: dict[str, Any], headers: Mapping[str, str]) -> ScriptedResponse | None:
        with self._lock:
            now = time.time()
            self._arrivals.append(now)
            self._requests.append(body)
            self._request_times.append(time.time())
            self._request_headers.append({k.lower(): v for k, v in headers.items()})
            if self._over_rate_limit(now):
                self._rejected += 1
                return ScriptedResponse(status=429, error_message="Rate limit reached", headers={"Retry-After": "1"})
            if self._script:
                return self._script.pop(0)
        if self._handler is not None:
            return ScriptedResponse.coerce(self._handler(body))
        return None

    def _tool_calls_of(self, response: ScriptedResponse) -> list[ScriptedToolCall]:
        calls = [_coerce_tool_call(spec) for spec in response.tool_calls]
        if response.raw_arguments is not None and calls:
            calls[0].raw_arguments = response.raw_arguments
        with self._lock:
            for call in calls:
                if call.id is None:
                    self._tool_call_counter += 1
                    call.id = f"call_{self._tool_call_counter}"
        return calls

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops meanwhile; False means it is stopping."""
        return seconds <= 0 or not self._stopping.wait(seconds)


def _coerce_tool_call(spec: ToolCallSpec) -> ScriptedToolCall:
    if isinstance(spec, ScriptedToolCall):
        return ScriptedToolCall(spec.name, dict(spec.arguments), spec.id, spec.raw_arguments)
    if isinstance(spec, tuple):
        name, arguments = spec
        return ScriptedToolCall(name, dict(arguments))
    return ScriptedToolCall(
        name=str(spec["name"]),
        arguments=dict(spec.get("arguments") or {}),
        id=spec.get("id"),
        raw_arguments=spec.get("raw_arguments"),
    )


def _split_text(text: str, parts: int = 3) -> list[str]:
    """Split text into word-ish pieces so clients see several deltas."""
    if not text:
        return []
    words = text.split(" ")
    pieces = [w + " " for w in words[:-1]] + [words[-1]]
    pieces = [p for p in pieces if p]
    if len(pieces) >= parts:
        return pieces
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _default_usage(response: ScriptedResponse) -> dict[str, Any]:
    completion = len((response.text or "").split()) + 5 * len(response.tool_calls) + 1
    return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}


def _make_request_handler(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(_RequestHandler):
        owner = server

    return _Handler


class _RequestHandler(BaseHTTPRequestHandler):
    """One HTTP/1.0 exchange per connection: streams are close-delimited, like a dropped proxy."""

    owner: ScriptedOpenAIServer
    server_version = "ScriptedOpenAI/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        """``GET /v1/models`` lists the one fake model."""
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": _MODEL_ID, "object": "model"}]})
        else:
            self._send_error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        """``POST /v1/chat/completions`` answers from the script."""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_error(404, f"no route for POST {self.path}")
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._send_error(400, f"request body is not JSON: {exc}")
            return
        if self.owner._reject_if_too_large(body, length):
            limit = self.owner.max_request_bytes
            message = (
                f"This model's maximum context length is {limit} bytes. However, your messages resulted "
                f"in {length} bytes. Please reduce the length of the messages."
            )
            self._send_json(
                400, {"error": {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}}
            )
            return
        try:
            response = self.owner._next_response(body, dict(self.headers.items()))
        except Exception as exc:  # a user handler failed: answer, so the test sees why
            self._send_error(500, f"ScriptedOpenAIServer handler raised {exc!r}")
            return
        if response is None:
            count = self.owner.request_count
            self._send_error(500, f"ScriptedOpenAIServer script exhausted (request {count} had no response)")
            return
        if not self.owner._sleep(response.delay_seconds):
            return
        if response.status != 200:
            self._send_error(
                response.status,
                response.error_message or f"scripted error {response.status}",
                response.headers,
            )
            return
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._send_stream(response, include_usage)
        else:
            completion = self._completion(response)
            self._send_json(200, completion, response.headers)
            self.owner._record_usage(completion["usage"])

    # -- responses -------------------------------------------------------------------------------

    def _send_json(self, status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        error_type = (
            "rate_limit_error" if status == 429 else "invalid_request_error" if status < 500 else "server_error"
        )
        self._send_json(status, {"error": {"message": message, "type": error_type, "code": None}}, headers)

    def _completion(self, response: ScriptedResponse) -> dict[str, Any]:
        calls = self.owner._tool_calls_of(response)
        message: dict[str, Any] = {"role": "assistant", "content": response.text}
        if response.reasoning is not None:
            message["reasoning_content"] = response.reasoning
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments(c)}}
                for c in calls
            ]
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": _MODEL_ID,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(response, calls)}],
            "usage": response.usage if response.usage is not None else _default_usage(response),
        }

    def _send_stream(self, response: ScriptedResponse, include_usage: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.end_headers()
        for sent, chunk in enumerate(self._stream_chunks(response, include_usage)):
            if response.drop_after_chunks is not None and sent >= response.drop_after_chunks:
                self._drop_connection()
                return
            if sent and not self.owner._sleep(response.chunk_delay_seconds):
                return
            line = "data: [DONE]" if chunk is None else "data: " + json.dumps(chunk)
            try:
                self.wfile.write((line + "\n\n").encode())
                self.wfile.flush()
            except OSError:
                return
            if chunk is not None and chunk.get("usage") is not None:
                self.owner._record_usage(chunk["usage"])

    def _drop_connection(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream_chunks(self, response: ScriptedResponse, include_usage: bool) -> Iterator[dict[str, Any] | None]:
        calls = self.owner._tool_calls_of(response)
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": created,
                "model": _MODEL_ID,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        yield chunk({"role": "assistant", "content": ""})
        for piece in _split_text(response.reasoning or ""):
            yield chunk({"reasoning_content": piece})
        for piece in _split_text(response.text or ""):
            yield chunk({"content": piece})
        for index, call in enumerate(calls):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
            for fragment in _split_text(_arguments(call)):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        yield chunk({}, _finish_reason(response, calls))
        if include_usage:
            usage = response.usage if response.usage is not None else _default_usage(response)
            yield {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": created,
                "model": _MODEL_ID,
                "choices": [],
                "usage": usage,
            }
        yield None


def _arguments(call: ScriptedToolCall) -> str:
    return call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)


def _finish_reason(response: ScriptedResponse, calls: list[ScriptedToolCall]) -> str:
    if response.finish_reason is not None:
        return response.finish_reason
    return "tool_calls" if calls else "stop"
