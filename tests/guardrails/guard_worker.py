"""A real worker process for the guardrail recovery test: an agent whose tool and result guard count their runs.

The tool appends ``tool:<text>`` and the guard ``guard:<tool_call_id>`` to the side-effect file,
so the test counts both across the worker it SIGKILLs and the one that recovers the run.

Usage: python guard_worker.py DATABASE_URL LLM_BASE_URL SIDE_EFFECT_FILE SESSION_ID [--start]
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

from helix_dbos import define_agent, define_tool
from helix_dbos.guardrails import Guardrails, GuardrailVerdict, define_guardrail
from helix_dbos.guardrails.definitions import GuardrailInput
from tests.worker_harness import append_line, serve_session

DATABASE_URL, LLM_BASE_URL, SIDE_EFFECTS, SESSION_ID = sys.argv[1:5]


class LineIn(BaseModel):
    text: str


def append_line_tool(inp: LineIn, ctx: object) -> dict[str, str]:
    append_line(SIDE_EFFECTS, f"tool:{inp.text}")
    return {"appended": inp.text}


def counted_guard(given: GuardrailInput) -> GuardrailVerdict:
    append_line(SIDE_EFFECTS, f"guard:{given.tool_call_id}")
    return GuardrailVerdict(info={"checked": True})


agent = define_agent(
    "guard-crash-agent",
    system_prompt="You append a line.",
    llm_config={"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0},
    tools=[define_tool("append_line", input_schema=LineIn, execute=append_line_tool)],
    capabilities=[Guardrails([define_guardrail("counted", counted_guard, stages="tool_result")])],
)

serve_session(
    DATABASE_URL, [agent], SESSION_ID, executor_id="guard-crash-worker", start="go" if "--start" in sys.argv else None
)
