"""A send that leaves late after its claim is counted where it arrived: ``exact`` is exact however late.

Real parts: PostgreSQL (the gate's claims in ``helix_rate_sends``, the database's clock), a real
HTTP client (httpx, whose transport is gated as LiteLLM's are, by ``gate_transport``) and the
scripted OpenAI-compatible server answering ``429`` above ``N`` requests a second on its own clock.
The transport under the gate sleeps between the claim and the write, as a loaded process would:
two requests of a 2-per-second limit leave 0.7 s after their claims. A third request, claimed as
soon as the gate lets it, must wait for their real send times (a period after them), not for their
stamps: counted from the stamps, it would meet both at the provider in one second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from helix_dbos import ProviderRateLimit
from helix_dbos.llm.litellm.send_gate_transport import gate_transport
from helix_dbos.llm.send_slot import request_leaving, send_slots
from helix_dbos.runtime.send_gate import PostgresSendGate
from helix_dbos.store.engine import to_sqlalchemy_url
from helix_dbos.testing import ScriptedOpenAIServer
from tests.scale.rate_limit_load import max_in_window

pytestmark = pytest.mark.postgres

LATE_S = 0.7
"""How long the slow requests take, after their claim, to be written (past the 0.05 s margin)."""
DELAY_HEADER = "x-test-delay-before-write"


class SlowToWrite(httpx.AsyncHTTPTransport):
    """An httpx transport that waits before writing a request (the request's header says how long).

    ``trace``: whether httpcore's trace still reaches the gate (it reports the send at the headers'
    write); without it the gate learns of the send only when the response begins (as with aiohttp).
    """

    def __init__(self, *, trace: bool) -> None:
        super().__init__()
        self._trace = trace

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(float(request.headers.get(DELAY_HEADER, "0")))
        if not self._trace:
            request.extensions.pop("trace", None)
        return await super().handle_async_request(request)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(handler=lambda _: {"text": "ok"}, rate_limit_per_second=2) as s:
        yield s


@pytest.mark.parametrize("trace", [True, False], ids=["headers-traced", "response-began"])
def test_claims_after_a_late_send_wait_for_its_real_send_time(
    new_migrated_database: Callable[[str], str], server: ScriptedOpenAIServer, trace: bool
) -> None:
    limit = ProviderRateLimit(match="openai/", name="late", requests=2, period_s=1.0)
    window = limit.send_window()
    engine = sa.create_engine(to_sqlalchemy_url(new_migrated_database("latesend")))
    gate = PostgresSendGate(engine)
    slots: dict[str, Any] = {}

    async def send(name: str, start_after: float, late: float) -> int:
        async def claim(model: str) -> Any:
            slots[name] = await gate.claim(window)
            return slots[name]

        await asyncio.sleep(start_after)
        with send_slots(claim), request_leaving("openai/fake"):
            response = await client.post(
                f"{server.base_url}/chat/completions",
                json={"model": "fake", "messages": [{"role": "user", "content": name}]},
                headers={DELAY_HEADER: str(late)},
            )
        return response.status_code

    async def load() -> list[int]:
        return list(await asyncio.gather(send("a", 0.0, LATE_S), send("b", 0.05, LATE_S), send("c", 0.1, 0.0)))

    client = httpx.AsyncClient(transport=gate_transport(SlowToWrite(trace=trace)), timeout=30)
    try:
        statuses = asyncio.run(load())
    finally:
        asyncio.run(client.aclose())
        engine.dispose()
    arrivals = server.arrival_times
    assert statuses == [200, 200, 200], (statuses, arrivals)
    assert server.rejected_count == 0
    assert max_in_window(arrivals, 1.0) <= 2, arrivals
    a, c = slots["a"], slots["c"]
    assert a.reported - a.stamp >= LATE_S  # the report measured the late write, not the claim
    assert c.stamp >= a.reported + window.period_s - 1e-6  # c waited a period after a's real send
