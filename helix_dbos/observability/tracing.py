"""OpenTelemetry spans for agent runs: one trace per session, GenAI semantic conventions.

Why the trace id is derived from the session id: a session spans many runs (turns, HITL
continuations) and a run may be executed by several processes (a crash, a takeover). Each of them
must put its spans in the same trace without sharing memory, so the session's root context is a
pure function of the session id: :func:`session_context` builds a remote, never-exported
``NonRecordingSpan`` from a deterministic trace id and span id, and every run span is its child.
A custom ``IdGenerator`` would not do: the tracer provider belongs to the application.

Only the OpenTelemetry *API* is used here (a core dependency): with no SDK provider installed
every span is the API's no-op and a run pays nothing (:func:`tracing_active`). The SDK and the
OTLP exporter come with the ``[otel]`` extra (:mod:`helix_dbos.observability.otlp`).

DBOS 3.4 has its own OTLP spans (``enable_otlp`` in its config; off by default), parented on the
ambient context when a workflow starts. helix-dbos parents its spans explicitly instead, so the two
never interfere: with both on, DBOS's workflow and step spans are a separate trace per workflow.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, Tracer, TracerProvider

from helix_dbos._version import __version__

TRACER_NAME = "helix_dbos"

_provider: TracerProvider | None = None
_tracer: Tracer | None = None
_global: tuple[TracerProvider, Tracer] | None = None


def instrument(tracer_provider: TracerProvider | None = None) -> None:
    """Send helix-dbos's spans to ``tracer_provider`` instead of the global one (``None``: global again).

    The global provider (``opentelemetry.trace.set_tracer_provider``) is what applications
    usually configure, and helix-dbos uses it by default; a provider of its own lets a test or an
    application keep helix-dbos's spans apart without touching the global one.
    """
    global _provider, _tracer
    _provider = tracer_provider
    _tracer = None


def tracer() -> Tracer:
    """The tracer helix-dbos creates spans with (the global provider's unless :func:`instrument` set one)."""
    global _tracer
    if _provider is not None:
        if _tracer is None:
            _tracer = _provider.get_tracer(TRACER_NAME, __version__)
        return _tracer
    # The global provider is a proxy until the application installs one; looking it up each time
    # follows a provider installed after import, and the tracer is made once per provider.
    global _global
    provider = trace.get_tracer_provider()
    if _global is None or _global[0] is not provider:
        _global = (provider, provider.get_tracer(TRACER_NAME, __version__))
    return _global[1]


def tracing_active() -> bool:
    """Whether spans would go anywhere: a tracer provider is installed (globally or by :func:`instrument`).

    Without one the API hands out no-op spans; checking first lets a run skip even those.
    """
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def _digest(session_id: str) -> bytes:
    return hashlib.sha256(b"helix-dbos session " + session_id.encode("utf-8", "surrogatepass")).digest()


def session_trace_id(session_id: str) -> int:
    """The trace id of every span of ``session_id`` (128 bits of SHA-256 of the id; never 0)."""
    return int.from_bytes(_digest(session_id)[:16], "big") or 1


def session_span_id(session_id: str) -> int:
    """The span id of the session's root context (64 bits; never 0). No span with it is exported."""
    return int.from_bytes(_digest(session_id)[16:24], "big") or 1


def session_context(session_id: str) -> Context:
    """The parent context of a session's run spans: same trace for every run, in every process."""
    root = SpanContext(
        trace_id=session_trace_id(session_id),
        span_id=session_span_id(session_id),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(root))


def format_trace_id(trace_id: int) -> str:
    """A trace id as backends print it (32 lower-case hex digits)."""
    return format(trace_id, "032x")


def provider_name(model: str) -> str | None:
    """``gen_ai.provider.name`` from a LiteLLM model string (``openai/gpt-4o`` -> ``openai``)."""
    prefix, sep, _ = model.partition("/")
    return prefix if sep and prefix else None


def clean_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Drop ``None`` values and turn sequences into lists of strings (OTel takes only primitives)."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            out[key] = [str(v) for v in value]
        else:
            out[key] = value
    return out


__all__ = [
    "TRACER_NAME",
    "clean_attributes",
    "format_trace_id",
    "instrument",
    "provider_name",
    "session_context",
    "session_span_id",
    "session_trace_id",
    "tracer",
    "tracing_active",
]
