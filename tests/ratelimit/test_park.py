"""A run that waits long for a provider's admission parks: its thread leaves, and it is resumed once admitted.

One process on the embedded SQLite default and on PostgreSQL, the real LiteLLM client against the
scripted OpenAI-compatible server. A ``concurrency=1`` limit and a first call that holds the slot for
seconds; the second run waits past its hot window (0.2 s here) and parks. What is checked: while
parked no thread executes the run's workflow (every thread's stack is looked at), the run records
its park, it is resumed once the slot is free (its admission dequeued), the run
ends ``completed`` with the model called once (the resumed execution replays the recorded wait and
park and never parks twice), ``result()`` follows it across the park, and its stream has each
chunk once. A run admitted within its hot window records nothing more than the patch, and its
admission is as it was. An aborted parked run is not resumed, and the slot its admission holds
is freed at once, not after the limit's hold timeout.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbos import DBOS

from helix_dbos import LLMConfig, ProviderRateLimit, define_agent, launch, shutdown
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.rate_limits import (
    ADMISSION_WORKFLOW_NAME,
    RATE_EXACT_PATCH,
    RATE_LIMITS_PATCH,
    RATE_PARK_PATCH,
    rate_limit_waits,
)
from helix_dbos.testing import ScriptedOpenAIServer
from tests.ratelimit.probes import threads_running, wait_for

SLOW_SECONDS = 2.0
HOT_WINDOW_S = 0.2


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer([{"text": "slow", "delay_seconds": SLOW_SECONDS}], handler=lambda _: {"text": "ok"}) as s:
        yield s


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The embedded SQLite default, and PostgreSQL (DBOS's queues and resume on its system database)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_database_url"))
    return f"sqlite:///{tmp_path}/helix.sqlite"


def _deployment(
    url: str, server: ScriptedOpenAIServer, limit: ProviderRateLimit, hot_window_seconds: float = HOT_WINDOW_S
) -> DBOSAgentExecutor:
    config = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test")
    agent = define_agent("limited", system_prompt="Answer.", llm_config=config)
    return launch(
        url,
        agents=[agent],
        rate_limits=[limit],
        hot_window_seconds=hot_window_seconds,
        background_tasks=False,
    )


@pytest.fixture
def concurrency_one(database_url: str, server: ScriptedOpenAIServer) -> Iterator[DBOSAgentExecutor]:
    executor = _deployment(database_url, server, ProviderRateLimit(match="openai/fake", name="openai", concurrency=1))
    try:
        yield executor
    finally:
        shutdown(executor)


def _steps(run_id: str) -> list[str]:
    return [s["function_name"] for s in DBOS.list_workflow_steps(run_id)]


def test_a_run_waiting_past_its_hot_window_parks_holds_no_thread_and_is_resumed_when_admitted(
    concurrency_one: DBOSAgentExecutor, server: ScriptedOpenAIServer
) -> None:
    executor = concurrency_one
    first = executor.execute("limited", "one")
    wait_for(lambda: server.request_count == 1)  # the slow call holds the only slot
    first_run = f"{first.session_id}-turn-1"
    assert threads_running(first_run) == 1  # the probe sees a running run
    second = executor.execute("limited", "two")
    second_run = f"{second.session_id}-turn-1"
    wait_for(lambda: "limited.rate_limit.park" in _steps(second_run))
    wait_for(lambda: threads_running(second_run) == 0, timeout=5)
    assert DBOS.get_workflow_status(second_run).status == "PENDING"  # parked, not ended
    assert rate_limit_waits(DBOS, [second_run]) == {second_run: "openai"}  # still shown as waiting
    assert server.request_count == 1

    assert first.result().status == "completed"
    result = second.result()  # its local future ended when it parked: the result follows the resumed run
    assert result.status == "completed" and result.output == "ok"
    assert server.request_count == 2  # one model call a run: the resumed run replayed its wait
    arrivals = server.arrival_times
    assert arrivals[1] - arrivals[0] >= SLOW_SECONDS * 0.9

    steps = _steps(second_run)
    assert steps.count("limited.rate_limit.park") == 1 and steps.count("limited.llm") == 1, steps
    park = steps.index("limited.rate_limit.park")
    assert "DBOS.getEvent" in steps[park - 2 : park] and steps[park + 1] == "DBOS.getEvent", steps  # then admitted
    admission = DBOS.retrieve_workflow(f"{second_run}-conc-1").get_result()
    assert admission == {"limit": "openai", "released": True}
    chunks = [c.model_dump(exclude={"timestamp"}) for c in asyncio.run(_chunks(executor, second.session_id))]
    assert chunks and len(chunks) == len({repr(c) for c in chunks})  # no chunk twice (a repeat differs in time only)


async def _chunks(executor: DBOSAgentExecutor, session_id: str) -> list[object]:
    stream = await executor.read_stream(session_id)
    assert stream is not None
    return [chunk async for chunk in stream]


def test_a_run_admitted_within_its_hot_window_records_only_the_patch_more(
    database_url: str, server: ScriptedOpenAIServer
) -> None:
    limit = ProviderRateLimit(match="openai/fake", name="openai", requests=100)
    executor = _deployment(database_url, server, limit, hot_window_seconds=30)  # DBOS picks a new queue up within 1 s
    try:
        handle = executor.execute("limited", "hi")
        assert handle.result().status == "completed"
        steps = _steps(f"{handle.session_id}-turn-1")
        patches = [f"DBOS.patch-{name}" for name in (RATE_LIMITS_PATCH, RATE_EXACT_PATCH, RATE_PARK_PATCH)]
        assert steps[:4] == [*patches, ADMISSION_WORKFLOW_NAME], steps
        assert steps[4:] == ["DBOS.getEvent", "DBOS.sleep", "limited.llm", "limited.finalize"], steps  # no park
        admission = DBOS.retrieve_workflow(f"{handle.session_id}-turn-1-rate-1")
        assert admission.get_result() == {"limit": "openai", "released": False}  # the admission is as it was
        assert [s["function_name"] for s in DBOS.list_workflow_steps(admission.get_workflow_id())] == ["DBOS.setEvent"]
    finally:
        shutdown(executor)


def test_an_aborted_parked_run_is_not_resumed_and_its_slot_is_freed_at_once(
    concurrency_one: DBOSAgentExecutor, server: ScriptedOpenAIServer
) -> None:
    executor = concurrency_one
    first = executor.execute("limited", "one")
    wait_for(lambda: server.request_count == 1)
    second = executor.execute("limited", "two")
    second_run = f"{second.session_id}-turn-1"
    wait_for(lambda: "limited.rate_limit.park" in _steps(second_run) and threads_running(second_run) == 0)
    executor.abort(second.session_id, "changed my mind")
    third = executor.execute("limited", "three")
    assert first.result().status == "completed"
    began = time.monotonic()
    assert third.result(timeout_seconds=30).status == "completed"  # not after the slot's 600 s hold timeout
    assert time.monotonic() - began < 15
    assert second.result().status == "failed"
    assert DBOS.get_workflow_status(second_run).status == "CANCELLED"  # the admission did not resume it
    admission = DBOS.retrieve_workflow(f"{second_run}-conc-1").get_result()
    assert admission == {"limit": "openai", "released": True}  # released by the watch, the run being gone
    sent = [json.dumps(body.get("messages")) for body in server.requests]
    assert sum('"three"' in m for m in sent) == 1 and not any('"two"' in m for m in sent)  # "two" never sent
