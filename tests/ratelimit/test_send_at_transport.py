"""A send slot is claimed by LiteLLM's HTTP transport, right before the request is written.

The real LiteLLM client against the scripted OpenAI-compatible server (which timestamps each
request it receives, on its own clock). LiteLLM's own work before a send is made slow on purpose
(an input callback that takes 0.4 s, as a loaded process's scheduling would): the claim must still
come after that work, within a few milliseconds of the request's arrival at the provider. Also:
every HTTP request claims once (a provider's ``429`` counted, its ``Retry-After`` honoured before
the next), and a request that left through a client without the gate is still counted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest

from helix_dbos import LLMConfig
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.llm.litellm import LiteLLMAdapter, import_litellm
from helix_dbos.llm.retry import RetryPolicy
from helix_dbos.llm.send_slot import NO_SLOT, SendSlot, SendSlotClaim, send_slots
from helix_dbos.messages import UserMessage
from helix_dbos.testing import ScriptedOpenAIServer

SLOW_PRE_SEND_SECONDS = 0.4


def _claims() -> tuple[SendSlotClaim, list[tuple[str, float]]]:
    made: list[tuple[str, float]] = []

    async def claim(model: str) -> SendSlot:
        made.append((model, time.time()))
        return NO_SLOT

    return claim, made


def _call(server: ScriptedOpenAIServer, *, stream: bool, claim: SendSlotClaim, **config: object) -> str:
    llm = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test", **config)  # type: ignore[arg-type]
    step = LiteLLMAdapter(stream=stream).generate_step(
        LLMGenerateInput(messages=[UserMessage(content="hi")], tools=[], config=llm, agent_id="gate", agent_type="gate")
    )

    async def in_step() -> str:
        with send_slots(claim):
            return (await step).type

    return asyncio.run(in_step())


@pytest.fixture
def slow_litellm() -> Iterator[None]:
    """LiteLLM takes 0.4 s of its own between ``acompletion`` and the send (a loaded process)."""
    litellm = import_litellm()
    from litellm.integrations.custom_logger import CustomLogger

    class SlowBeforeSend(CustomLogger):  # type: ignore[misc]
        def log_pre_api_call(self, model: object, messages: object, kwargs: object) -> None:
            time.sleep(SLOW_PRE_SEND_SECONDS)

    slow = SlowBeforeSend()
    litellm.input_callback.append(slow)
    try:
        yield
    finally:
        litellm.input_callback.remove(slow)


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_the_claim_comes_after_litellm_s_own_work_right_before_the_send(slow_litellm: None, stream: bool) -> None:
    claim, made = _claims()
    with ScriptedOpenAIServer(handler=lambda _: {"text": "ok"}) as server:
        _call(server, stream=stream, claim=claim)  # the SDK and its client loaded
        made.clear()
        assert _call(server, stream=stream, claim=claim) == "text"
        arrival = server.arrival_times[-1]
    assert [model for model, _ in made] == ["openai/fake"]
    # Claimed before LiteLLM's 0.4 s, the request would arrive that much after its claim.
    assert arrival - made[0][1] < 0.15, arrival - made[0][1]


def test_each_request_claims_and_a_429_s_retry_after_is_honoured() -> None:
    claim, made = _claims()
    script = [{"status": 429, "headers": {"Retry-After": "1"}}, {"text": "ok"}]
    retry = RetryPolicy(max_attempts=2, initial_backoff_seconds=0.0, jitter=0.0)
    with ScriptedOpenAIServer(script) as server:
        assert _call(server, stream=False, claim=claim, retry=retry) == "text"
        arrivals = server.arrival_times
    assert len(made) == 2 == len(arrivals)  # the refused request was sent: its slot stays counted
    assert arrivals[1] - arrivals[0] >= 0.95  # the provider's Retry-After, not the backoff


def test_a_request_through_an_ungated_client_is_counted_after_it_left(caplog: pytest.LogCaptureFixture) -> None:
    import httpx

    litellm = import_litellm()
    claim, made = _claims()
    with ScriptedOpenAIServer(handler=lambda _: {"text": "ok"}) as server:
        litellm.aclient_session = httpx.AsyncClient()  # the caller's own client: no gated transport
        try:
            with caplog.at_level(logging.WARNING, logger="helix_dbos.llm.litellm"):
                assert _call(server, stream=False, claim=claim, timeout_seconds=17.0) == "text"
        finally:
            litellm.aclient_session = None
        arrival = server.arrival_times[-1]
    assert len(made) == 1 and made[0][1] >= arrival  # counted once, after it was sent
    assert "without the send gate" in caplog.text
