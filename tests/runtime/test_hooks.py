"""Lifecycle hooks: every hook fires, once per step under replay, and per-call hooks follow the run
(issue 9 item 6; seed 001 "Per-call hooks ... fire on every execute()/resume()/retry() ... falling back to
the constructor-bound static on cross-worker recovery")."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import AgentHooks, MockLLMAdapter, define_agent, define_tool
from helix_dbos.runtime.hooks import HOOK_NAMES
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class CityIn(BaseModel):
    city: str


def said(text: str) -> TextStepResult:
    return TextStepResult(content=text, should_stop=True, stop_reason="end_turn")


def calls(*items: tuple[str, str, dict[str, Any]]) -> ToolCallsStepResult:
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in items], stop_reason="tool_use"
    )


class Recorder:
    """Hook sets that count (and list) what fired, under a label."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.events: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def hooks(self, label: str, names: tuple[str, ...] = HOOK_NAMES) -> AgentHooks:
        def make(name: str) -> Any:
            def hook(payload: Any) -> None:
                with self._lock:
                    self.counts[f"{label}.{name}"] += 1
                    self.events.append((label, name, getattr(payload, "run_id", "")))

            return hook

        return AgentHooks(**{name: make(name) for name in names})

    def fired(self, label: str) -> list[tuple[str, str]]:
        with self._lock:
            return [(name, run_id) for lab, name, run_id in self.events if lab == label]


def wait_for(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


ask = define_tool("ask_browser", input_schema=CityIn, execute="client")


def test_per_call_hooks_follow_parked_continuation_retry_and_resume(make_executor: ExecutorFactory) -> None:
    rec = Recorder()
    agent = define_agent(
        "hook-follow", system_prompt="x", llm_config="openai/fake", tools=[ask], hooks=rec.hooks("agent")
    )
    model = MockLLMAdapter(
        [
            calls(("c1", "ask_browser", {"city": "?"})),  # run 1 parks
            said("first"),  # run 2: the continuation
            said("retried"),  # run 3: retry
            calls(("c2", "ask_browser", {"city": "?"})),  # run 4: execute, parks
            said("resumed"),  # run 5: resume of run 4, answered hot
        ]
    )
    executor = make_executor(model, [agent], hot_window_seconds=0.2)

    first = executor.execute(agent, "where?", hooks=rec.hooks("h1"))
    assert first.result().status == "suspended_client_tool"
    continued = executor.submit_tool_result(
        first.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Lyon"}
    )
    assert continued is not None and continued.hooks is not None
    assert continued.result().status == "completed"
    # The continuation, started by the answer in this process, kept the per-call hooks.
    assert rec.fired("h1") == [
        ("on_agent_start", first.run_id),
        ("before_llm_call", first.run_id),
        ("after_llm_call", first.run_id),
        ("on_agent_suspended", first.run_id),
        ("on_message", first.run_id),  # the assistant's call, when the parked run commits
        ("on_agent_start", continued.run_id),
        ("on_agent_resumed", continued.run_id),  # not suspended again: its answers are in
        ("on_message", continued.run_id),
        ("after_tool", continued.run_id),
        ("before_llm_call", continued.run_id),
        ("after_llm_call", continued.run_id),
        ("on_message", continued.run_id),
        ("on_agent_complete", continued.run_id),
    ]

    retried = executor.retry(first.session_id, hooks=rec.hooks("h2", ("on_agent_start", "on_agent_complete")))
    assert retried.result().status == "completed"
    assert rec.fired("h2") == [("on_agent_start", retried.run_id), ("on_agent_complete", retried.run_id)]

    parked = executor.execute(agent, "again", session_id=first.session_id, hooks=rec.hooks("h3"))
    assert parked.result().status == "suspended_client_tool"
    resumed = executor.resume(agent, first.session_id, hooks=rec.hooks("h4", ("on_agent_start", "on_agent_resumed")))
    wait_for(lambda: ("h4", "on_agent_start", resumed.run_id) in rec.events)
    executor.submit_tool_result(first.session_id, {"kind": "client-tool-result", "tool_call_id": "c2", "result": 1})
    assert resumed.result().status == "completed"
    assert rec.fired("h4") == [("on_agent_start", resumed.run_id), ("on_agent_resumed", resumed.run_id)]
    assert all(run_id == parked.run_id for _, run_id in rec.fired("h3"))  # only its own run
    # Every run fired the agent's own hooks.
    assert rec.counts["agent.on_agent_start"] == 5
    assert rec.counts["h1.on_agent_start"] == 2


def test_handle_resume_and_retry_pass_the_handles_hooks(make_executor: ExecutorFactory) -> None:
    rec = Recorder()
    agent = define_agent("hook-handle", system_prompt="x", llm_config="openai/fake")
    executor = make_executor(MockLLMAdapter([said("one"), said("two")]), [agent])
    handle = executor.execute(agent, "go", hooks=rec.hooks("call", ("on_agent_complete",)))
    assert handle.result().status == "completed"
    again = handle.retry()
    assert again.hooks is handle.hooks and again.result().status == "completed"
    assert rec.fired("call") == [("on_agent_complete", handle.run_id), ("on_agent_complete", again.run_id)]


def test_a_continuation_in_another_process_falls_back_to_the_agents_hooks(make_executor: ExecutorFactory) -> None:
    rec = Recorder()
    agent = define_agent(
        "hook-fallback",
        system_prompt="x",
        llm_config="openai/fake",
        tools=[ask],
        hooks=rec.hooks("agent", ("on_agent_complete",)),
    )
    model = MockLLMAdapter([calls(("c1", "ask_browser", {"city": "?"})), said("done")])
    executor = make_executor(model, [agent], hot_window_seconds=0.2)
    handle = executor.execute(agent, "go", hooks=rec.hooks("call"))
    assert handle.result().status == "suspended_client_tool"
    before = len(rec.fired("call"))
    executor._services.call_hooks.clear()  # what another process has: per-call hooks are process-local
    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "x"}
    )
    assert continued is not None and continued.result().status == "completed"
    assert len(rec.fired("call")) == before
    assert rec.fired("agent") == [("on_agent_complete", continued.run_id)]


def test_hooks_do_not_fire_again_when_a_run_is_replayed_without_its_per_call_hooks(
    make_executor: ExecutorFactory,
) -> None:
    """A run cancelled mid-tool and re-executed by DBOS (as recovery does) replays its recorded steps.

    The replay happens without the per-call hooks (as in another process): the run still takes the
    same steps (DBOS checks their names), and no hook of a recorded step fires a second time.
    """
    rec = Recorder()
    entered, release = threading.Event(), threading.Event()

    def slow(inp: CityIn, ctx: Any) -> dict[str, str]:
        if inp.city == "Oslo":  # the second call: the run has recorded a hooks step by now
            entered.set()
            release.wait(10)
        return {"city": inp.city}

    agent = define_agent(
        "hook-replay",
        system_prompt="x",
        llm_config="openai/fake",
        tools=[define_tool("slow", input_schema=CityIn, execute=slow)],
        hooks=rec.hooks("agent", ("on_agent_start", "before_llm_call", "after_llm_call", "on_agent_complete")),
    )
    model = MockLLMAdapter(
        [calls(("t0", "slow", {"city": "Bergen"})), calls(("t1", "slow", {"city": "Oslo"})), said("done")]
    )
    executor = make_executor(model, [agent])
    # Per-call hooks define hooks that take steps of their own (on_message, after_tool).
    handle = executor.execute(agent, "go", hooks=rec.hooks("call"))
    assert entered.wait(10)
    DBOS.cancel_workflow(handle.workflow_id)
    release.set()
    wait_for(lambda: DBOS.get_workflow_status(handle.workflow_id).status == "CANCELLED")
    time.sleep(0.2)  # let the cancelled attempt's thread reach its next step and stop
    executor._services.call_hooks.clear()

    DBOS.resume_workflow(handle.workflow_id)
    result = handle.result(timeout_seconds=30)
    assert result.status == "completed" and result.output == "done"
    assert model.call_count == 3
    assert rec.counts["agent.on_agent_start"] == 1
    assert rec.counts["agent.before_llm_call"] == 3 and rec.counts["agent.after_llm_call"] == 3
    assert rec.counts["agent.on_agent_complete"] == 1
    # The per-call hooks fired before the cancellation and never again.
    assert rec.counts["call.on_agent_start"] == 1 and rec.counts["call.before_llm_call"] == 2
    assert rec.counts["call.after_tool"] == 1 and rec.counts["call.on_agent_complete"] == 0


def test_executor_wide_hooks_fire_first_on_every_run_and_join_the_hook_plan(make_executor: ExecutorFactory) -> None:
    """Seed order executor -> agent -> per-call; the executor's hooks decide hook steps like the others."""
    rec = Recorder()
    agent = define_agent(
        "hook-executor", system_prompt="x", llm_config="openai/fake", hooks=rec.hooks("agent", ("on_agent_start",))
    )
    executor = make_executor(
        MockLLMAdapter([said("one"), said("two")]),
        [agent],
        hooks={
            "on_agent_start": rec.hooks("executor", ("on_agent_start",)).on_agent_start,
            "on_message": rec.hooks("executor", ("on_message",)).on_message,
        },
    )
    first = executor.execute(agent, "go", hooks=rec.hooks("call", ("on_agent_start",)))
    assert first.result().status == "completed"
    assert [(label, name) for label, name, _ in rec.events if name == "on_agent_start"] == [
        ("executor", "on_agent_start"),
        ("agent", "on_agent_start"),
        ("call", "on_agent_start"),
    ]
    # on_message is defined only by the executor's hooks: it is in the run's plan, so it fired.
    assert ("on_message", first.run_id) in rec.fired("executor")
    second = executor.retry(first.session_id)
    assert second.result().status == "completed"
    assert ("on_agent_start", second.run_id) in rec.fired("executor")


def test_on_agent_resumed_carries_the_checkpoint_the_run_resumes_from(make_executor: ExecutorFactory) -> None:
    seen: list[Any] = []
    agent = define_agent(
        "hook-resumed-ckpt",
        system_prompt="x",
        llm_config="openai/fake",
        tools=[ask],
        hooks=AgentHooks(on_agent_resumed=seen.append),
    )
    model = MockLLMAdapter([calls(("c1", "ask_browser", {"city": "?"})), said("done")])
    executor = make_executor(model, [agent], hot_window_seconds=0.2)
    handle = executor.execute(agent, "go")
    assert handle.result().status == "suspended_client_tool"
    latest = executor.store.get_latest_checkpoint(handle.session_id)
    assert latest is not None
    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "x"}
    )
    assert continued is not None and continued.result().status == "completed"
    assert [p.resumed_from_checkpoint_id for p in seen] == [latest.id]
    assert seen[0].previous_run_id == handle.run_id
