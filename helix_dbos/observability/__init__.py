"""Observability: OpenTelemetry spans (one trace per session) and lifecycle logs of agent runs.

- :mod:`.tracing`: the tracer, the session's deterministic trace id, :func:`instrument` to give
  helix-dbos a tracer provider of its own;
- :mod:`.run_observer`: what a run reports, from workflow code and from step bodies;
- :mod:`.lifecycle`: the ``helix_dbos.lifecycle`` logger and its events;
- :mod:`.otlp`: ``HELIX_OTLP_ENDPOINT``, an OTLP exporter in one setting (the ``[otel]`` extra);
- :mod:`.log_setup`: ``HELIX_LOG_LEVEL`` / ``HELIX_LOG_FORMAT`` for ``serve`` and ``worker``.

This package sits below the runtime: it knows spans and log records, not DBOS workflows.
"""

from __future__ import annotations

from helix_dbos.observability.lifecycle import LOGGER_NAME
from helix_dbos.observability.log_setup import JsonFormatter, configure_logging
from helix_dbos.observability.otlp import OTEL_INSTALL_HINT, OTLP_ENDPOINT_ENV, configure_otlp
from helix_dbos.observability.tracing import format_trace_id, instrument, session_trace_id, tracing_active

__all__ = [
    "LOGGER_NAME",
    "OTEL_INSTALL_HINT",
    "OTLP_ENDPOINT_ENV",
    "JsonFormatter",
    "configure_logging",
    "configure_otlp",
    "format_trace_id",
    "instrument",
    "session_trace_id",
    "tracing_active",
]
