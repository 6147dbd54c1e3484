"""An OTLP exporter in one setting: ``HELIX_OTLP_ENDPOINT`` (``HelixSettings.otlp_endpoint``).

An application that already configures OpenTelemetry needs none of this: helix-dbos uses the
global tracer provider. For everyone else, setting ``HELIX_OTLP_ENDPOINT`` to an OTLP/HTTP base URL
(``http://localhost:4318``, ``https://cloud.langfuse.com/api/public/otel``) makes :func:`launch`
(which reads it through :class:`~helix_dbos.settings.HelixSettings`) install an SDK tracer provider
that batches spans to ``{endpoint}/v1/traces``. Headers (a
backend's credentials) come from the standard ``OTEL_EXPORTER_OTLP_HEADERS``, and the service name
from ``OTEL_SERVICE_NAME`` (default ``helix-dbos``). It needs the ``[otel]`` extra.
"""

from __future__ import annotations

import os

from opentelemetry import trace

OTLP_ENDPOINT_ENV = "HELIX_OTLP_ENDPOINT"
"""The variable :class:`~helix_dbos.settings.HelixSettings` reads the endpoint from (named in messages)."""
OTEL_INSTALL_HINT = "pip install 'helix-dbos[otel]'"


def configure_otlp(endpoint: str, *, service_name: str | None = None) -> bool:
    """Install a global SDK tracer provider exporting to ``endpoint`` over OTLP/HTTP.

    Returns ``False`` (and installs nothing) when the application already installed a provider:
    its configuration wins. Raises ``ModuleNotFoundError`` naming the ``[otel]`` extra when the
    OpenTelemetry SDK or its OTLP exporter is not installed.
    """
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"{OTLP_ENDPOINT_ENV} needs the OpenTelemetry SDK and OTLP exporter ({exc.name} is not installed): "
            f"{OTEL_INSTALL_HINT}",
            name=exc.name,
        ) from exc
    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    name = service_name or os.environ.get("OTEL_SERVICE_NAME") or "helix-dbos"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    trace.set_tracer_provider(provider)
    return True


__all__ = ["OTEL_INSTALL_HINT", "OTLP_ENDPOINT_ENV", "configure_otlp"]
