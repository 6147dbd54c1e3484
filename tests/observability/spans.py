"""Reading spans in tests: an SDK provider with an in-memory exporter, a file exporter for worker
processes, and the span tree printed the way the README shows it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


class FileSpanExporter(SpanExporter):
    """One JSON line per span, written as each span ends (a SIGKILL loses only spans not yet ended)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a") as f:
            for span in spans:
                f.write(json.dumps(span_record(span)) + "\n")
            f.flush()
        return SpanExportResult.SUCCESS


def span_record(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.get_span_context()
    assert ctx is not None
    return {
        "name": span.name,
        "trace_id": ctx.trace_id,
        "span_id": ctx.span_id,
        "parent_id": span.parent.span_id if span.parent else None,
        "attributes": dict(span.attributes or {}),
        "events": [e.name for e in span.events],
        "status": span.status.status_code.name,
        "start": span.start_time,
    }


def read_span_file(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def tree(records: list[dict[str, Any]]) -> str:
    """The spans as an indented tree (children in start order), for failure messages and the README."""
    by_parent: dict[int | None, list[dict[str, Any]]] = {}
    ids = {r["span_id"] for r in records}
    for r in sorted(records, key=lambda r: r["start"]):
        by_parent.setdefault(r["parent_id"] if r["parent_id"] in ids else None, []).append(r)
    keys = (
        "helix.step",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "helix.status",
        "helix.recovered",
        "helix.previous_run_id",
        "helix.hitl.outcome",
    )
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for r in by_parent.get(parent, []):
            shown = {
                k.split(".")[-1] if k.startswith("helix.") else k: r["attributes"][k]
                for k in keys
                if k in r["attributes"]
            }
            extra = " ".join(f"{k}={v}" for k, v in shown.items())
            lines.append(f"{'  ' * depth}{r['name']}" + (f"  [{extra}]" if extra else ""))
            walk(r["span_id"], depth + 1)

    walk(None, 0)
    return "\n".join(lines)
