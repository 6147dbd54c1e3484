"""CPU per run of helix-dbos's observability alone: the observer calls of a 10-step, 9-tool run.

``bench_overhead.py --observe`` measures tracing inside whole runs on PostgreSQL, where its cost is
within the machine's noise; this isolates it. The calls are the ones the runtime makes, in its
order (open, per step: commit, model call, tool call, then finalize and close), with:

- off:     no tracer provider, lifecycle logger at WARNING (the default of a library): the no-op observer;
- logs:    lifecycle records formatted and written to /dev/null;
- tracing: an SDK provider with a batch processor and an exporter that drops the spans;
- both.

Usage: python scripts/bench_observability.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from helix_dbos.observability import instrument
from helix_dbos.observability.run_observer import RunInfo, observe_run
from helix_dbos.step_result import TextStepResult, TokenUsage

STEPS = 10


class Discard(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def one_run(i: int) -> None:
    info = RunInfo(f"session-{i}", f"session-{i}-turn-1", "bench", "openai/gpt-4o-mini", 1, "execute")
    result = TextStepResult(content="x", stop_reason="tool_use", usage=TokenUsage(input_tokens=10, output_tokens=2))
    with observe_run(info) as observer:
        for step in range(1, STEPS + 1):
            observer.committed(step - 1, True)
            with observer.llm_call(step, info.model) as call:
                call.done(result)
            observer.llm_step_returned(step)
            if step < STEPS:
                with observer.tool_call(f"t{step}", "tool") as tool:
                    tool.done(True, None)
        observer.finalized("completed", step_count=STEPS, applied=True)
        observer.close("completed")


def measure(runs: int) -> float:
    for i in range(50):
        one_run(i)
    start = time.process_time()
    for i in range(runs):
        one_run(i)
    return (time.process_time() - start) / runs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    lifecycle = logging.getLogger("helix_dbos.lifecycle")
    lifecycle.propagate = False
    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    lifecycle.addHandler(handler)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    print(f"observer calls of a run with {STEPS} LLM steps and {STEPS - 1} tool calls, CPU per run:")
    for name, tracing, logs in (
        ("off", False, False),
        ("logs", False, True),
        ("tracing", True, False),
        ("both", True, True),
    ):
        instrument(provider if tracing else None)
        lifecycle.setLevel(logging.INFO if logs else logging.WARNING)
        print(f"  {name:8s} {measure(args.runs):8.1f} us")
    instrument(None)
    provider.shutdown()


if __name__ == "__main__":
    main()
