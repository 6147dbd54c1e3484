"""Fixtures for the observability tests: the runtime tests' database and executors, and ``spans``,
an in-memory exporter behind a tracer provider given to helix-dbos alone (``instrument``), so the
global provider, and every other test, stays untraced."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helix_dbos.observability import instrument
from tests.observability.spans import memory_provider
from tests.runtime.conftest import make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider, exporter = memory_provider()
    instrument(provider)
    yield exporter
    instrument(None)
    provider.shutdown()
