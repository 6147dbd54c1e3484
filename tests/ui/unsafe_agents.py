"""The agent of the inspector's outcome-unknown test: ``helix-dbos serve --agents tests.ui.unsafe_agents:agents
--llm-adapter tests.ui.unsafe_agents:model``.

``cashier`` calls ``charge`` (not retry-safe) once, then says what it got. The first ``charge`` of a
marker file's life (``HELIX_TEST_CRASH_MARKER``) SIGKILLs its own server mid-call: a worker dying
while a charge is in flight.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from helix_dbos import LLMGenerateInput, MockLLMAdapter, ToolContext, ToolResultMessage, define_agent, define_tool
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult


class ChargeIn(BaseModel):
    amount: int


def charge(inp: ChargeIn, ctx: ToolContext) -> dict[str, Any]:
    marker = Path(os.environ["HELIX_TEST_CRASH_MARKER"])
    if not marker.exists():
        marker.write_text(ctx.idempotency_key)
        os.kill(os.getpid(), signal.SIGKILL)
    return {"charged": inp.amount}


cashier = define_agent(
    "cashier",
    system_prompt="Charge, then say so.",
    llm_config="scripted/cashier",
    tools=[
        define_tool("charge", description="Charge the card", input_schema=ChargeIn, execute=charge, retry_safe=False)
    ],
)

agents = [cashier]


def decide(inp: LLMGenerateInput) -> TextStepResult | ToolCallsStepResult:
    """Charge once; then report the charge's result."""
    last = inp.messages[-1]
    if isinstance(last, ToolResultMessage):
        return TextStepResult(content=f"Charge result: {last.content}", should_stop=True, stop_reason="end_turn")
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id="pay-1", name="charge", arguments={"amount": 42})], stop_reason="tool_use"
    )


def model() -> MockLLMAdapter:
    """A fresh scripted model whose every call is decided by :func:`decide`."""
    return MockLLMAdapter([decide] * 1_000)
