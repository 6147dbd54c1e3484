"""The exact gate of a provider limit: at most ``requests`` sends in any window, claimed at the send.

Real parts: PostgreSQL (claims from several threads, each with its own engine, as workers would
make them; the count is read back from ``helix_rate_sends`` in the database's own clock), and one
process on the SQLite default with the real LiteLLM client against the scripted server (which
timestamps each request it receives).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from dbos import DBOS

from helix_dbos import LLMConfig, ProviderRateLimit, define_agent, launch, shutdown
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.rate_limits import ADMISSION_WORKFLOW_NAME, RATE_EXACT_PATCH, RATE_LIMITS_PATCH, RATE_PARK_PATCH
from helix_dbos.runtime.send_gate import PostgresSendGate, SendWindow
from helix_dbos.store.engine import to_sqlalchemy_url
from helix_dbos.testing import ScriptedOpenAIServer
from tests.scale.rate_limit_load import max_in_window


@pytest.mark.postgres
def test_claims_from_several_processes_never_put_more_than_n_in_a_window(
    new_migrated_database: Callable[[str], str],
) -> None:
    url = to_sqlalchemy_url(new_migrated_database("sendgate"))
    window = SendWindow("openai", 3, 0.5)
    engines = [sa.create_engine(url) for _ in range(4)]
    stamps: list[float] = []

    async def claim_and_send(gate: PostgresSendGate) -> None:
        (await gate.claim(window)).sent()  # sent at once: reported on time

    def claimant(engine: sa.Engine) -> None:
        gate = PostgresSendGate(engine)
        for _ in range(3):
            asyncio.run(claim_and_send(gate))

    try:
        threads = [threading.Thread(target=claimant, args=(e,)) for e in engines]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        with engines[0].connect() as conn:
            stamps = [float(t) for t in conn.execute(sa.text("SELECT claimed_at FROM helix_rate_sends")).scalars()]
    finally:
        for engine in engines:
            engine.dispose()
    # Pruning keeps only the last window's claims; all 12 were made, so the last window is full
    assert 1 <= len(stamps) <= 3
    assert max_in_window(stamps, window.window_s) <= 3


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(handler=lambda _: {"text": "ok"}) as s:
        yield s


@pytest.fixture
def executor(tmp_path: Path, server: ScriptedOpenAIServer) -> Iterator[DBOSAgentExecutor]:
    config = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test")
    agent = define_agent("exact", system_prompt="Answer.", llm_config=config)
    limit = ProviderRateLimit(match="openai/", name="openai", requests=2, mode="exact", polling_interval_s=0.05)
    running = launch(f"sqlite:///{tmp_path}/helix.sqlite", agents=[agent], rate_limits=[limit], background_tasks=False)
    try:
        yield running
    finally:
        shutdown(running)


def test_an_exact_limit_gates_each_send_and_records_no_release(
    executor: DBOSAgentExecutor, server: ScriptedOpenAIServer
) -> None:
    assert executor.execute("exact", "warm up").result().status == "completed"  # the SDK loaded
    handles = [executor.execute("exact", f"call {i}") for i in range(6)]
    assert [h.result().status for h in handles] == ["completed"] * 6
    sends = server.arrival_times[1:]
    assert len(sends) == 6
    assert max_in_window(sends, 1.0) <= 2  # the provider's one-second windows
    assert max(sends) - min(sends) >= 2 * 1.05 * 0.95  # six sends, two per 1.05 s window
    run_id = f"{handles[0].session_id}-turn-1"
    names = [s["function_name"] for s in DBOS.list_workflow_steps(run_id)]
    patches = [f"DBOS.patch-{name}" for name in (RATE_LIMITS_PATCH, RATE_EXACT_PATCH, RATE_PARK_PATCH)]
    assert names[:4] == [*patches, ADMISSION_WORKFLOW_NAME]
    assert names[-2:] == ["exact.llm", "exact.finalize"]  # the gate is inside the model step: no step of its own
    assert "DBOS.send" not in names  # no held slot to release
