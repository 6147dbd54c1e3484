"""``HELIX_OTLP_ENDPOINT`` is the one setting that ships spans to an OTLP backend, and the SDK is an
optional extra (``[otel]``) whose absence is one line naming it.

The backend here is a local HTTP server that decodes the OTLP/HTTP protobuf requests it receives;
the run is a real process (``launch()`` on SQLite with a scripted model), which flushes its batch of
spans when it exits.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from helix_dbos.observability import session_trace_id

REPO = Path(__file__).resolve().parents[2]

RUN = """
from helix_dbos import MockLLMAdapter, define_agent, launch, shutdown

agent = define_agent("otlp-agent", system_prompt="x", llm_config="openai/gpt-4o-mini")
model = MockLLMAdapter([{"type": "text", "content": "hi", "should_stop": True, "stop_reason": "end_turn"}])
executor = launch("sqlite:///{db}", agents=[agent], llm_adapter=model, background_tasks=False)
handle = executor.execute(agent, "hello", session_id="otlp-session")
assert handle.result().status == "completed"
shutdown(executor)
print("done")
"""


@pytest.fixture
def collector() -> Iterator[dict[str, Any]]:
    received: dict[str, Any] = {"paths": [], "spans": [], "headers": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received["paths"].append(self.path)
            received["headers"].append(dict(self.headers))
            for resource_spans in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        received["spans"].append((span.name, int.from_bytes(span.trace_id, "big"), service))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    received["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    yield received
    server.shutdown()


def test_helix_otlp_endpoint_sends_the_runs_spans(collector: dict[str, Any], tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HELIX_OTLP_ENDPOINT": collector["url"],
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20dGVzdA==",  # percent-encoded, per the spec
        "OTEL_SERVICE_NAME": "otlp-test",
    }
    proc = subprocess.run(
        [sys.executable, "-c", RUN.replace("{db}", str(tmp_path / "helix.sqlite"))],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr
    assert set(collector["paths"]) == {"/v1/traces"}
    sent = [{k.lower(): v for k, v in h.items()} for h in collector["headers"]]
    assert all(h.get("authorization") == "Basic dGVzdA==" for h in sent), sent  # a backend's credentials
    names = sorted(name for name, _, _ in collector["spans"])
    assert names == ["chat openai/gpt-4o-mini", "invoke_agent otlp-agent", "step 1"], collector["spans"]
    assert {trace_id for _, trace_id, _ in collector["spans"]} == {session_trace_id("otlp-session")}
    assert {service["service.name"] for _, _, service in collector["spans"]} == {"otlp-test"}


_WITHOUT_SDK = """
import sys

class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Missing())
"""


def test_without_the_otel_extra_runs_are_untraced_and_the_endpoint_names_the_extra() -> None:
    script = _WITHOUT_SDK + textwrap.dedent(
        """
        import helix_dbos
        import helix_dbos.cli
        import helix_dbos.runtime.launch
        from helix_dbos.observability import configure_otlp, tracing_active

        assert not [m for m in sys.modules if m.startswith("opentelemetry.sdk")]
        assert not tracing_active()
        try:
            configure_otlp("http://127.0.0.1:4318")
        except ImportError as exc:
            print(exc)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'helix-dbos[otel]'" in proc.stdout
    assert proc.stdout.count("\n") == 1, proc.stdout
