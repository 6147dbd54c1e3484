"""A model call a provider limit matches waits for admission on the limit's DBOS queue, visibly.

One process on the embedded SQLite default, the real LiteLLM client against the scripted
OpenAI-compatible server (which timestamps every request). What is checked: a run waiting for a
``concurrency=1`` slot is shown as "waiting for rate limit <name>" (by what the inspector and
``helix-dbos sessions show`` read) while the other run's call is at the provider, and the provider
never has two calls at once; the admission is recorded in the run (the replay patch, a child with a
deterministic id, the wait, the release), so a replay of the recorded run calls the model no
second time and enqueues no second admission; a run whose model no limit matches records none of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dbos import DBOS, SetWorkflowID
from typer.testing import CliRunner

from helix_dbos import LLMConfig, ProviderRateLimit, define_agent, launch, shutdown
from helix_dbos.cli import app
from helix_dbos.observability import instrument, session_trace_id
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.rate_limits import ADMISSION_WORKFLOW_NAME, RATE_LIMITS_PATCH, RATE_PARK_PATCH, rate_limit_waits
from helix_dbos.testing import ScriptedOpenAIServer
from tests.observability.spans import memory_provider, span_record
from tests.ratelimit.probes import wait_for

SLOW_SECONDS = 1.5


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer([{"text": "slow", "delay_seconds": SLOW_SECONDS}], handler=lambda _: {"text": "ok"}) as s:
        yield s


@pytest.fixture
def deployment(tmp_path: Path, server: ScriptedOpenAIServer) -> Iterator[tuple[DBOSAgentExecutor, str]]:
    url = f"sqlite:///{tmp_path}/helix.sqlite"
    config = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test")
    limited = define_agent("limited", system_prompt="Answer.", llm_config=config)
    free = define_agent("free", system_prompt="Answer.", llm_config=config.model_copy(update={"model": "openai/free"}))
    executor = launch(
        url,
        agents=[limited, free],
        rate_limits=[ProviderRateLimit(match="openai/fake", name="openai", concurrency=1)],
        background_tasks=False,
    )
    try:
        yield executor, url
    finally:
        shutdown(executor)


def test_a_waiting_call_is_shown_and_the_provider_never_has_two_at_once(
    deployment: tuple[DBOSAgentExecutor, str], server: ScriptedOpenAIServer
) -> None:
    executor, url = deployment
    first = executor.execute("limited", "one")
    wait_for(lambda: server.request_count == 1)  # the slow call holds the only slot
    second = executor.execute("limited", "two")
    second_run = f"{second.session_id}-turn-1"
    wait_for(lambda: rate_limit_waits(DBOS, [second_run]) == {second_run: "openai"})
    shown = CliRunner().invoke(app, ["sessions", "show", second.session_id, "--database-url", url])
    assert shown.exit_code == 0, shown.output
    assert "waiting for rate limit openai" in shown.output
    assert server.request_count == 1  # still waiting: the slot is taken
    assert first.result().status == "completed" and second.result().status == "completed"
    arrivals = server.arrival_times
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= SLOW_SECONDS * 0.9
    assert rate_limit_waits(DBOS, [second_run]) == {}


def test_the_admission_is_recorded_and_a_replay_calls_the_model_once(
    deployment: tuple[DBOSAgentExecutor, str], server: ScriptedOpenAIServer
) -> None:
    executor, _ = deployment
    handle = executor.execute("limited", "hi")
    assert handle.result().status == "completed"
    run_id = f"{handle.session_id}-turn-1"
    steps = DBOS.list_workflow_steps(run_id)
    names = [s["function_name"] for s in steps]
    patches = [f"DBOS.patch-{RATE_LIMITS_PATCH}", f"DBOS.patch-{RATE_PARK_PATCH}"]
    assert names[:4] == [*patches, ADMISSION_WORKFLOW_NAME, "DBOS.getEvent"]
    assert names[-3:] == ["limited.llm", "DBOS.send", "limited.finalize"]
    assert steps[2]["child_workflow_id"] == f"{run_id}-conc-1"  # deterministic: the same id on replay
    admissions = len(DBOS.list_workflows(name=ADMISSION_WORKFLOW_NAME))
    calls = server.request_count

    finalize = next(s["function_id"] for s in steps if s["function_name"] == "limited.finalize")
    with SetWorkflowID(f"{run_id}-replayed"):
        replay = DBOS.fork_workflow(run_id, finalize)
    replay.get_result()
    assert server.request_count == calls  # the recorded model call was not made again
    assert len(DBOS.list_workflows(name=ADMISSION_WORKFLOW_NAME)) == admissions  # nor a second admission


def test_a_model_no_limit_matches_records_no_admission(
    deployment: tuple[DBOSAgentExecutor, str], server: ScriptedOpenAIServer
) -> None:
    executor, _ = deployment
    handle = executor.execute("free", "hi")
    assert handle.result().status == "completed"
    names = [s["function_name"] for s in DBOS.list_workflow_steps(f"{handle.session_id}-turn-1")]
    assert names == ["free.llm", "free.finalize"]


def test_the_wait_is_a_span_of_its_step(
    deployment: tuple[DBOSAgentExecutor, str], server: ScriptedOpenAIServer
) -> None:
    executor, _ = deployment
    provider, exporter = memory_provider()
    instrument(provider)
    try:
        handle = executor.execute("limited", "hi")
        assert handle.result().status == "completed"
    finally:
        instrument(None)
        provider.shutdown()
    trace_id = session_trace_id(handle.session_id)
    found = [r for r in map(span_record, exporter.get_finished_spans()) if r["trace_id"] == trace_id]
    (wait,) = [r for r in found if r["name"] == "helix.rate_limit.wait"]
    (step,) = [r for r in found if r["name"].startswith("step ") and r["attributes"].get("helix.step") == 1]
    assert wait["parent_id"] == step["span_id"]
    assert wait["attributes"]["helix.rate_limit.name"] == "openai"
