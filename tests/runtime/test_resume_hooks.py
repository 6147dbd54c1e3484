"""``on_agent_resumed`` on every resume, and the seeds' per-call ``hook_manager`` option.

Seed 001 ("Resume runId semantics"): "When a session is resumed, the onAgentResumed hook fires with
{ runId, previousRunId, sessionId, resumedFromCheckpointId }", and ``previousRunId`` is always the run
that stopped (each ``resume()`` allocates a new run). The seeds say nothing of ``retry()`` firing it:
a retry is a new start from a checkpoint, not a resume, and these tests pin that it does not.
Seed 001 also names the per-call option ``ExecuteOptions.hookManager`` beside ``ExecuteOptions.hooks``
("fire on every execute()/resume()/retry()").

Each test launches on the embedded SQLite default, and on PostgreSQL where the resume path is tested.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import AgentHooks, ConflictingOptionsError, LiteLLMAdapter, MockLLMAdapter, define_agent, define_tool
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.hooks import RunPayload
from helix_dbos.runtime.launch import launch, shutdown
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.testing import ScriptedOpenAIServer
from helix_dbos.usage import Budget
from tests.conftest import STORE_BACKENDS

Launcher = Callable[..., DBOSAgentExecutor]
usage = {"prompt_tokens": 70, "completion_tokens": 10, "total_tokens": 80}


def said(text: str) -> TextStepResult:
    return TextStepResult(content=text, should_stop=True, stop_reason="end_turn")


noop = define_tool("noop", execute=lambda i, c: {"ok": True})


def slow_first_step() -> tuple[Any, threading.Event, threading.Event]:
    """A model response held until released: a tool call, so the run reaches another model call,
    where it reads an interrupt that arrived meanwhile."""
    started, release = threading.Event(), threading.Event()

    async def slow(inp: LLMGenerateInput) -> ToolCallsStepResult:
        started.set()
        await asyncio.to_thread(release.wait, 10)
        call = ParsedToolCall(id="t1", name="noop", arguments={})
        return ToolCallsStepResult(tool_calls=[call], stop_reason="tool_use")

    return slow, started, release


@pytest.fixture(params=STORE_BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'helix.sqlite'}"
    url: str = request.getfixturevalue("new_migrated_database")("resumehooks")
    return url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'helix.sqlite'}"


def _launcher(url: str) -> Iterator[Launcher]:
    started: list[DBOSAgentExecutor] = []

    def start(model: Any, agents: list[Any], hot_window_seconds: float | None = None) -> DBOSAgentExecutor:
        executor = launch(
            url,
            agents=agents,
            llm_adapter=model,
            hot_window_seconds=hot_window_seconds,
            background_tasks=False,
            dbos_overrides={"notification_listener_polling_interval_sec": 0.01},
        )
        started.append(executor)
        return executor

    yield start
    for executor in started:
        shutdown(executor, drain_timeout_seconds=5)


@pytest.fixture
def start_on_each_backend(database_url: str) -> Iterator[Launcher]:
    yield from _launcher(database_url)


@pytest.fixture
def start_on_sqlite(sqlite_url: str) -> Iterator[Launcher]:
    yield from _launcher(sqlite_url)


def interrupted_run(start: Launcher, name: str, hooks: AgentHooks, after: list[Any]) -> tuple[DBOSAgentExecutor, Any]:
    """A run interrupted while its first model call is in flight (it stops before the second)."""
    slow, started, release = slow_first_step()
    agent = define_agent(name, system_prompt="x", llm_config="openai/fake", tools=[noop], hooks=hooks)
    executor = start(MockLLMAdapter([slow, *after]), [agent])
    handle = executor.execute(agent, "go")
    assert started.wait(10)
    assert executor.interrupt(handle.session_id, "pause") is True
    release.set()
    assert handle.result().status == "interrupted"
    return executor, handle


def test_resume_of_an_interrupted_session_fires_on_agent_resumed_once(start_on_each_backend: Launcher) -> None:
    resumed: list[RunPayload] = []
    executor, first = interrupted_run(
        start_on_each_backend, "resumed-after-interrupt", AgentHooks(on_agent_resumed=resumed.append), [said("done")]
    )
    latest = executor.store.get_latest_checkpoint(first.session_id)
    assert latest is not None
    assert resumed == []  # an interrupt is not a resume

    again = executor.resume("resumed-after-interrupt", first.session_id, "carry on")
    assert again.result().status == "completed"
    assert len(resumed) == 1
    payload = resumed[0]
    assert (payload.session_id, payload.run_id, payload.previous_run_id) == (
        first.session_id,
        again.run_id,
        first.run_id,
    )
    assert again.run_id != first.run_id
    assert payload.resumed_from_checkpoint_id == latest.id


def test_retry_does_not_fire_on_agent_resumed(start_on_sqlite: Launcher) -> None:
    """Pinned: the seeds fire ``onAgentResumed`` when a session is resumed; a retry starts over."""
    fired: list[tuple[str, str]] = []
    hooks = AgentHooks(
        on_agent_resumed=lambda p: fired.append(("on_agent_resumed", p.run_id)),
        on_agent_start=lambda p: fired.append(("on_agent_start", p.run_id)),
    )
    executor, first = interrupted_run(start_on_sqlite, "retry-not-resumed", hooks, [said("again")])
    retried = executor.retry(first.session_id)
    assert retried.result().status == "completed"
    assert fired == [("on_agent_start", first.run_id), ("on_agent_start", retried.run_id)]


def test_hook_manager_is_the_per_call_hooks_of_execute_resume_and_retry(start_on_sqlite: Launcher) -> None:
    fired: list[tuple[str, str, str]] = []

    def recorder(label: str) -> AgentHooks:
        return AgentHooks(
            on_agent_start=lambda p: fired.append((label, "on_agent_start", p.run_id)),
            on_agent_resumed=lambda p: fired.append((label, "on_agent_resumed", p.run_id)),
        )

    slow, started, release = slow_first_step()
    agent = define_agent("hook-manager", system_prompt="x", llm_config="openai/fake", tools=[noop])
    executor = start_on_sqlite(MockLLMAdapter([slow, said("resumed"), said("retried")]), [agent])
    first = executor.execute(agent, "go", hook_manager=recorder("execute"))
    assert started.wait(10)
    executor.interrupt(first.session_id)
    release.set()
    assert first.result().status == "interrupted"
    as_dict = {"on_agent_resumed": recorder("resume").on_agent_resumed}
    resumed = executor.resume(agent, first.session_id, hook_manager=as_dict)
    assert resumed.result().status == "completed"
    retried = executor.retry(first.session_id, hook_manager=recorder("retry"))
    assert retried.result().status == "completed"
    assert fired == [
        ("execute", "on_agent_start", first.run_id),
        ("resume", "on_agent_resumed", resumed.run_id),
        ("retry", "on_agent_start", retried.run_id),
    ]
    # The handle keeps them as its per-call hooks, as with ``hooks=``.
    assert retried.hooks is not None and retried.hooks.on_agent_start is not None


def test_hooks_and_hook_manager_together_are_refused(start_on_sqlite: Launcher) -> None:
    agent = define_agent("hook-manager-both", system_prompt="x", llm_config="openai/fake")
    executor = start_on_sqlite(MockLLMAdapter([said("never")]), [agent])
    both = {"hooks": AgentHooks(), "hook_manager": AgentHooks()}
    with pytest.raises(ConflictingOptionsError) as caught:
        executor.execute(agent, "go", session_id="both-hooks", **both)
    assert caught.value.code == "validation_error"
    assert "hook_manager" in str(caught.value) and "hooks" in str(caught.value)
    assert executor.store.load_state("both-hooks") is None  # nothing was started
    with pytest.raises(ConflictingOptionsError):
        executor.resume(agent, "both-hooks", **both)
    with pytest.raises(ConflictingOptionsError):
        executor.retry("both-hooks", **both)


def test_a_continuation_fires_on_agent_resumed_once_where_its_wait_ends(start_on_each_backend: Launcher) -> None:
    """A parked budget approval: the continuation's start step sees the approval it waits on and
    leaves the hook to that wait, so the hook fires once, after the answer."""
    fired: list[RunPayload] = []
    with ScriptedOpenAIServer() as server:
        server.add(*[{"tool_calls": [("noop", {})], "usage": usage}] * 2, {"text": "Done.", "usage": usage})
        config = {"model": "openai/fake", "api_base": server.base_url, "api_key": "test", "max_retries": 0}
        agent = define_agent(
            "resumed-budget",
            system_prompt="x",
            llm_config=config,
            tools=[noop],
            budget=Budget(max_tokens=100),
            hooks=AgentHooks(on_agent_resumed=fired.append),
        )
        executor = start_on_each_backend(LiteLLMAdapter(), [agent], hot_window_seconds=0.2)
        first = executor.execute(agent, "go")
        assert first.result(timeout_seconds=60).status == "suspended_client_tool"
        assert fired == []
        continued = executor.submit_tool_result(
            first.session_id,
            {"kind": "approval-response", "tool_call_id": f"budget:{first.run_id}:2", "approved": True},
        )
        assert continued is not None and continued.result(timeout_seconds=60).status == "completed"
    assert [(p.run_id, p.previous_run_id) for p in fired] == [(continued.run_id, first.run_id)]
