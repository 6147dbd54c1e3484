"""The agent of the not-retry-safe tool crash tests, shared by the worker processes and the test.

``charge`` writes ``start`` to the side-effect file when it starts; on its very first call in the
file's life it then blocks (the test SIGKILLs the worker there), on any later call it writes
``done`` and returns. So the file counts how often the tool body started and finished, across
processes. Every process of the app registers this agent: DBOS may hand a recovered workflow to
any of them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from helix_dbos import AgentConfig, ToolContext, define_agent, define_tool
from helix_dbos.tool import UnknownOutcomePolicy
from tests.worker_harness import append_line

BLOCK_SECONDS = 60.0


class ChargeIn(BaseModel):
    amount: int


class Answer(BaseModel):
    answer: str


def charging_agent(
    llm_base_url: str,
    effects: str | Path,
    *,
    retry_safe: bool,
    unknown_outcome: UnknownOutcomePolicy | None = None,
    block: bool = True,
) -> AgentConfig:
    """Calls ``charge`` once, then finishes with its result (``retry_safe`` and ``unknown_outcome`` as
    given; ``block=False``: the first call does not block either)."""

    def charge(inp: ChargeIn, ctx: ToolContext) -> dict[str, Any]:
        append_line(effects, "start")
        if block and Path(effects).read_text().splitlines().count("start") == 1:
            time.sleep(BLOCK_SECONDS)  # the worker is killed while the charge is in flight
        append_line(effects, "done")
        return {"charged": inp.amount, "idempotency_key": ctx.idempotency_key}

    return define_agent(
        "charging-agent",
        system_prompt="Charge, then finish.",
        llm_config={"model": "openai/fake", "api_base": llm_base_url, "api_key": "test", "max_retries": 0},
        tools=[
            define_tool(
                "charge", input_schema=ChargeIn, execute=charge, retry_safe=retry_safe, unknown_outcome=unknown_outcome
            )
        ],
        output_schema=Answer,
    )


def model(body: dict[str, Any], *, hold_after_the_charge: bool = False) -> dict[str, Any]:
    """Scripted model: call ``charge`` (id ``c1``), then finish with the tool result's text.

    ``hold_after_the_charge``: the call after the charge hangs (the test kills the worker meanwhile).
    """
    results = [m for m in body["messages"] if m["role"] == "tool"]
    if results and hold_after_the_charge:
        return {"text": "slow", "delay_seconds": 30}
    if not results:
        return {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"amount": 42}}]}
    return {"tool_calls": [{"id": "fin", "name": "__finish__", "arguments": {"answer": results[0]["content"]}}]}
