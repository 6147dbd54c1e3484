"""A run recorded under a ``strict`` limit still replays when the deployment's limit turns ``exact``.

Also when it turns ``exact`` by the default alone: ``strict`` was the default ``mode``, so a run
recorded with no ``mode`` given then was recorded under ``strict``, and the same spec read today
(no ``mode``: ``exact``) must replay it as recorded.

One process on the embedded SQLite default, the real LiteLLM client against the scripted
OpenAI-compatible server. A run is recorded under a ``strict`` limit (its held slot and its
release are steps of the run); the deployment is then relaunched with the same limit in
``exact`` mode, and the recorded run is replayed from its record (forked at its
last step): the exact-mode patch answers ``False`` where the old run has its admission, so the
replay takes the recorded steps in order, calls the model no second time and enqueues no second
admission. A new run takes the exact path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dbos import DBOS, SetWorkflowID

from helix_dbos import LLMConfig, ProviderRateLimit, define_agent, launch, shutdown
from helix_dbos.agent import AgentConfig
from helix_dbos.runtime.rate_limits import (
    ADMISSION_WORKFLOW_NAME,
    RATE_EXACT_PATCH,
    RATE_LIMITS_PATCH,
    RATE_PARK_PATCH,
)
from helix_dbos.testing import ScriptedOpenAIServer


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(handler=lambda _: {"text": "ok"}) as s:
        yield s


def _agent(server: ScriptedOpenAIServer) -> AgentConfig:
    config = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="test")
    return define_agent("limited", system_prompt="Answer.", llm_config=config)


def _names(run_id: str) -> list[str]:
    return [str(s["function_name"]) for s in DBOS.list_workflow_steps(run_id)]


@pytest.mark.parametrize("relaunched", ["mode=exact", "the default mode"])
def test_a_run_recorded_under_strict_replays_when_the_limit_turns_exact(
    tmp_path: Path, server: ScriptedOpenAIServer, relaunched: str
) -> None:
    url = f"sqlite:///{tmp_path}/helix.sqlite"
    agent = _agent(server)

    strict = ProviderRateLimit(match="openai/", name="openai", requests=5, mode="strict", polling_interval_s=0.05)
    executor = launch(url, agents=[agent], rate_limits=[strict], background_tasks=False)
    try:
        handle = executor.execute("limited", "hi")
        assert handle.result().status == "completed"
        run_id = f"{handle.session_id}-turn-1"
        recorded = _names(run_id)
    finally:
        shutdown(executor)
    assert recorded[:4] == [
        f"DBOS.patch-{RATE_LIMITS_PATCH}",
        f"DBOS.patch-{RATE_PARK_PATCH}",
        ADMISSION_WORKFLOW_NAME,
        "DBOS.getEvent",
    ]
    assert "DBOS.send" in recorded  # the held slot's release
    calls = server.request_count

    spec = "openai/:requests=5/1,name=openai,poll=0.05" + (",mode=exact" if relaunched == "mode=exact" else "")
    exact = ProviderRateLimit.parse(spec)
    assert exact.mode == "exact"
    executor = launch(url, agents=[agent], rate_limits=[exact], background_tasks=False)
    try:
        admissions = len(DBOS.list_workflows(name=ADMISSION_WORKFLOW_NAME))
        steps = DBOS.list_workflow_steps(run_id)
        finalize = next(s["function_id"] for s in steps if s["function_name"] == "limited.finalize")
        with SetWorkflowID(f"{run_id}-replayed"):
            replay = DBOS.fork_workflow(run_id, finalize)
        replay.get_result()  # a replay that took the exact path would meet the wrong recorded step here
        assert _names(f"{run_id}-replayed") == recorded
        assert server.request_count == calls  # the recorded model call was not made again
        assert len(DBOS.list_workflows(name=ADMISSION_WORKFLOW_NAME)) == admissions  # nor a second admission

        fresh = executor.execute("limited", "hi again")
        assert fresh.result().status == "completed"
        names = _names(f"{fresh.session_id}-turn-1")
        assert names[:3] == [
            f"DBOS.patch-{RATE_LIMITS_PATCH}",
            f"DBOS.patch-{RATE_EXACT_PATCH}",
            f"DBOS.patch-{RATE_PARK_PATCH}",
        ]
        assert "DBOS.send" not in names  # gated at the send: no held slot to release
    finally:
        shutdown(executor)
