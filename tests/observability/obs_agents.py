"""The agent of the observed crash test, for its worker script and for ``helix-dbos worker --agents``.

Configured from the environment (the CLI gives an agents module nothing else): the scripted
model's URL (``HELIX_TEST_LLM_URL``) and the side-effect file (``HELIX_TEST_EFFECTS``). With
``HELIX_TEST_SPAN_FILE`` set, importing it installs a global SDK tracer provider that writes every
span to that file as the span ends, as an application that configures OpenTelemetry at import would.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic import BaseModel

from helix_dbos import AgentConfig, define_agent, define_tool
from tests.observability.spans import FileSpanExporter

if os.environ.get("HELIX_TEST_SPAN_FILE"):
    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(os.environ["HELIX_TEST_SPAN_FILE"])))
    trace.set_tracer_provider(_provider)


def _write(line: str) -> None:
    with Path(os.environ["HELIX_TEST_EFFECTS"]).open("a") as f:
        f.write(line + "\n")


class LineIn(BaseModel):
    text: str


class Answer(BaseModel):
    answer: str


def append_line(inp: LineIn, ctx: object) -> dict[str, str]:
    _write(f"append:{inp.text}")
    return {"appended": inp.text}


def slow_append(inp: LineIn, ctx: object) -> dict[str, str]:
    _write(f"start:{inp.text}")
    time.sleep(1.5)
    _write(f"append:{inp.text}")
    return {"appended": inp.text}


def submit(inp: Answer, ctx: object) -> dict[str, str]:
    return {"answer": inp.answer}


def agents() -> list[AgentConfig]:
    llm = {"model": "openai/fake", "api_base": os.environ["HELIX_TEST_LLM_URL"], "api_key": "test", "max_retries": 0}
    return [
        define_agent(
            "observed",
            system_prompt="You append lines, then submit.",
            llm_config=llm,
            tools=[
                define_tool("append_line", input_schema=LineIn, execute=append_line),
                define_tool("slow_append", input_schema=LineIn, execute=slow_append),
                define_tool("submit", input_schema=Answer, execute=submit, finish_with=True),
            ],
            output_schema=Answer,
        )
    ]
