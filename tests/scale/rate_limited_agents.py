"""The agent of the rate-limit tests and of ``scripts/bench_rate_limits.py``: one real LiteLLM call per run.

``helix-dbos worker|serve --agents tests.scale.rate_limited_agents:agents`` loads it in real
processes. Its model is ``openai/fake`` on the scripted OpenAI-compatible server whose base URL
``HELIX_RATE_TEST_API_BASE`` names (the test's or the benchmark's), called through the default
LiteLLM adapter, so every call is an HTTP request the server timestamps.

Loading it warms the process up with one call (``WARM_UP``) when the server is named. A process's
first LiteLLM call loads the provider's SDK and clients (about 2 s on the test machine), and in a
worker that happens *after* the call's admission: the call reaches the provider late, in the same
second as calls admitted a second later. A long-running worker has paid that once; the tests
measure the limit in that steady state, and leave the warm-up requests out of their counts.
"""

from __future__ import annotations

import os

import sqlalchemy as sa

from helix_dbos import LLMConfig, define_agent
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.llm.send_slot import SendSlot, SendSlotClaim, send_slots
from helix_dbos.messages import UserMessage
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.rate_limits import ProviderRateLimit
from helix_dbos.runtime.send_gate import PostgresSendGate
from helix_dbos.store.engine import to_sqlalchemy_url

WARM_UP = "warm-up"
_API_BASE = os.environ.get("HELIX_RATE_TEST_API_BASE")

caller = define_agent(
    "caller",
    system_prompt="Answer in one word.",
    llm_config=LLMConfig(model="openai/fake", api_base=_API_BASE or "http://127.0.0.1:9/v1", api_key="test"),
)
agents = [caller]


def _warm_up() -> None:
    """One streamed call through the adapter the runs use, on the loop their calls use.

    So the async client it builds is the one they reuse and the streamed code path is warm: a send
    that leaves seconds after its claim (a cold SDK) is what no limit counted before it can hold.
    """
    background_loop.run(
        LiteLLMAdapter().generate_step(
            LLMGenerateInput(
                messages=[UserMessage(content=WARM_UP)],
                tools=[],
                config=caller.llm_config,
                agent_id="warm-up",
                agent_type="caller",
            )
        )
    )


def _warm_up_claim(gate: str | None) -> SendSlotClaim | None:
    """The deployment's exact gate (``"N,database url"``), when it has one: the provider counts the warm-up too."""
    if not gate:
        return None
    requests, _, url = gate.partition(",")
    window = ProviderRateLimit(match="openai/", requests=int(requests), mode="exact").send_window()
    send_gate = PostgresSendGate(sa.create_engine(to_sqlalchemy_url(url)))

    async def claim(model: str) -> SendSlot:
        return await send_gate.claim(window)

    return claim


if _API_BASE and os.environ.get("HELIX_EXECUTOR_ID", "").startswith("w"):
    with send_slots(_warm_up_claim(os.environ.get("HELIX_RATE_TEST_GATE"))):
        _warm_up()
