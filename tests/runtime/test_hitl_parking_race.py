"""An answer that arrives while its run is parking is never lost: the run is continued, once.

A run that parks records its calls as ``parked`` (the registration with a zero hot window, or the
check that ends a hot window) and only then ends its workflow as ``suspended`` in its finalize
step. A client may answer in between: it sees the pending call as soon as the registration commits.
The submission then finds the run still ``running``, so it cannot start the continuation at once;
these tests hold the finalize step open across that moment and check that the run is continued all
the same, exactly once, with no manual ``resume``: by the submission once the run has suspended,
or by the workers' sweep when the suspend comes later than the submission waits for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import AgentHooks, MockLLMAdapter, define_agent, define_tool
from helix_dbos.runtime import loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.launch import launch, shutdown
from helix_dbos.runtime.steps import RunIdentity
from helix_dbos.store.base import SessionRecord
from tests.conftest import STORE_BACKENDS
from tests.runtime.test_hitl import CityIn, Out, calls, finish_with_results

location = define_tool("get_location", description="Ask the browser", input_schema=CityIn, execute="client")


@dataclass
class HeldFinalize:
    """Holds the finalize step of a suspending run until ``release`` says it may commit."""

    release: Callable[[RunIdentity], bool]
    """Polled while the step is held; True lets it commit (it is let go after 30 s regardless)."""
    entered: threading.Event = field(default_factory=threading.Event)
    committed: threading.Event = field(default_factory=threading.Event)


@pytest.fixture(params=STORE_BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'helix.sqlite'}"
    url: str = request.getfixturevalue("new_migrated_database")("parkrace")
    return url


@pytest.fixture
def hold_finalize(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[RunIdentity], bool]], HeldFinalize]:
    """Slow the finalize step of suspending runs down (after their calls were recorded as parked)."""
    holds: list[HeldFinalize] = []
    original = loop.finalize_step

    def finalize_step(who: RunIdentity, commit: Any, hook_sets: Any, payload: Any, *args: Any) -> Any:
        hold = holds[0] if holds and payload.status == "suspended_client_tool" else None
        if hold is None:
            return original(who, commit, hook_sets, payload, *args)
        hold.entered.set()
        deadline = time.monotonic() + 30
        while not hold.release(who) and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            return original(who, commit, hook_sets, payload, *args)
        finally:
            hold.committed.set()

    monkeypatch.setattr(loop, "finalize_step", finalize_step)

    def hold(release: Callable[[RunIdentity], bool]) -> HeldFinalize:
        holds.append(HeldFinalize(release))
        return holds[-1]

    return hold


@pytest.fixture
def start_executor(database_url: str) -> Iterator[Callable[..., DBOSAgentExecutor]]:
    """``launch()`` on the backend (background tasks on, as a worker runs), shut down after the test."""
    started: list[DBOSAgentExecutor] = []

    def start(
        agent: Any, model: MockLLMAdapter, hot_window_seconds: float, background_tasks: bool = True
    ) -> DBOSAgentExecutor:
        executor = launch(
            database_url,
            agents=[agent],
            llm_adapter=model,
            hot_window_seconds=hot_window_seconds,
            dbos_overrides={"notification_listener_polling_interval_sec": 0.01},
            background_tasks=background_tasks,
        )
        started.append(executor)
        return executor

    yield start
    for executor in started:
        shutdown(executor, drain_timeout_seconds=5)


def answered(executor: DBOSAgentExecutor, who: RunIdentity, call_id: str = "c1") -> bool:
    rows = executor.store.pending.get(who.session_id, [call_id])
    return bool(rows) and rows[0].status == "answered"


def answer(executor: DBOSAgentExecutor, session_id: str, call_id: str, result: str) -> Any:
    return executor.submit_tool_result(
        session_id, {"kind": "client-tool-result", "tool_call_id": call_id, "result": result}
    )


def settled_runs(executor: DBOSAgentExecutor, session_id: str, timeout: float = 10.0) -> list[tuple[int, str, str]]:
    """The session's runs once its last one completed (or as they are when ``timeout`` passes)."""
    deadline = time.monotonic() + timeout
    while True:
        runs = executor.list_runs(session_id)
        if runs[-1].status == "completed" or time.monotonic() >= deadline:
            return [(r.turn, r.status, r.mode) for r in runs]
        time.sleep(0.05)


def suspended_after_the_submission_gave_up(
    executor: DBOSAgentExecutor, agent: Any, hold_finalize: Callable[[Callable[[RunIdentity], bool]], HeldFinalize]
) -> tuple[Any, SessionRecord]:
    """Answer a parking run's call, let its suspend commit only after the submission returned.

    Returns the first run's handle and the session as it was read before the suspend committed.
    """
    submitted = threading.Event()
    held = hold_finalize(lambda who: submitted.is_set())
    first = executor.execute(agent, "where am I?")
    assert held.entered.wait(10)
    before_suspend = executor.store.load_session(first.session_id)  # the session as the run still ran
    assert before_suspend is not None
    assert answer(executor, first.session_id, "c1", "Quito") is None  # the run had not suspended yet
    submitted.set()
    assert held.committed.wait(10)
    return first, before_suspend


@pytest.mark.parametrize("hot_window_seconds", [0.0, 0.3])
def test_an_answer_submitted_while_the_run_parks_continues_it(
    start_executor: Callable[..., DBOSAgentExecutor],
    hold_finalize: Callable[[Callable[[RunIdentity], bool]], HeldFinalize],
    hot_window_seconds: float,
) -> None:
    """The answer commits after the calls were parked and before the run's suspend: the submission
    is the one that sees the run still ``running``. It still returns the continuation, which
    completes with the answer, and the session has exactly the two runs."""
    resumed: list[str] = []
    agent = define_agent(
        f"park-race-{int(hot_window_seconds * 10)}",
        system_prompt="x",
        llm_config="openai/fake",
        output_schema=Out,
        tools=[location],
        hooks=AgentHooks(on_agent_resumed=lambda p: resumed.append(p.run_id)),
    )
    executor = start_executor(
        agent, MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), hot_window_seconds
    )
    held = hold_finalize(lambda who: answered(executor, who))
    first = executor.execute(agent, "where am I?")
    assert held.entered.wait(10)  # the calls are parked, the run is still running
    assert [(c.tool_call_id, c.delivery) for c in executor.list_pending_tool_calls(first.session_id)] == [
        ("c1", "parked")
    ]
    continued = answer(executor, first.session_id, "c1", "Oslo")
    assert held.committed.wait(10)  # the run suspended after the answer had committed
    assert settled_runs(executor, first.session_id) == [(1, "suspended", "execute"), (2, "completed", "resume")]
    assert continued is not None and continued.run_id != first.run_id  # the submission continued it
    assert continued.result(timeout_seconds=10).output == Out(answer='"Oslo"')
    assert resumed == [continued.run_id]


def test_a_run_that_suspends_after_the_submission_gave_up_waiting_is_continued_by_the_sweep(
    start_executor: Callable[..., DBOSAgentExecutor],
    hold_finalize: Callable[[Callable[[RunIdentity], bool]], HeldFinalize],
) -> None:
    """The suspend commits only after the submission returned (it waits a bounded time): the
    workers' sweep finds the suspended run whose batch is complete and continues it, once."""
    agent = define_agent(
        "park-race-late", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location]
    )
    executor = start_executor(
        agent, MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), 0.0
    )
    first, _ = suspended_after_the_submission_gave_up(executor, agent, hold_finalize)
    assert settled_runs(executor, first.session_id) == [(1, "suspended", "execute"), (2, "completed", "resume")]
    assert executor.get_handle(first.session_id).result(timeout_seconds=10).output == Out(answer='"Quito"')  # type: ignore[union-attr]
    assert executor.expire_parked_calls() == []  # nothing left to continue: never a second continuation
    assert len(executor.list_runs(first.session_id)) == 2


def test_a_batch_with_a_call_still_open_is_not_continued(
    start_executor: Callable[..., DBOSAgentExecutor],
    hold_finalize: Callable[[Callable[[RunIdentity], bool]], HeldFinalize],
) -> None:
    """One of two calls answered while the run parks: the run stays suspended until the other is
    answered too, and that answer continues it."""
    agent = define_agent(
        "park-race-two", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location]
    )
    model = MockLLMAdapter(
        [calls(("c1", "get_location", {"city": "?"}), ("c2", "get_location", {"city": "??"})), finish_with_results]
    )
    executor = start_executor(agent, model, 0.0)
    held = hold_finalize(lambda who: answered(executor, who, "c1"))
    first = executor.execute(agent, "where am I?")
    assert held.entered.wait(10)
    assert answer(executor, first.session_id, "c1", "Lima") is None  # c2 is still open
    assert held.committed.wait(10)
    time.sleep(1.5)  # a sweep round or more
    assert executor.expire_parked_calls() == []
    assert [(r.turn, r.status) for r in executor.list_runs(first.session_id)] == [(1, "suspended")]
    continued = answer(executor, first.session_id, "c2", "Cusco")
    assert continued is not None
    assert continued.result(timeout_seconds=10).output == Out(answer='"Lima" | "Cusco"')
    assert len(executor.list_runs(first.session_id)) == 2


def test_a_session_read_from_before_the_suspend_still_continues_the_run(
    start_executor: Callable[..., DBOSAgentExecutor],
    hold_finalize: Callable[[Callable[[RunIdentity], bool]], HeldFinalize],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The continuation reads the session and then its run, two reads: the suspend can commit
    between them, so the run reads ``suspended`` while the session is the one from before (one
    version behind). The start's compare-and-set then fails although nobody else started anything;
    it reads again and continues the run, instead of handing back the suspended run and leaving the
    continuation to the sweep (what `test_an_answer_submitted_while_the_run_parks_continues_it` saw,
    about one run in twelve on a loaded machine). Here the stale read is made on purpose."""
    agent = define_agent(
        "park-race-stale", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location]
    )
    model = MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results])
    executor = start_executor(agent, model, 0.0, background_tasks=False)  # no sweep: this call must continue it
    first, before_suspend = suspended_after_the_submission_gave_up(executor, agent, hold_finalize)
    assert executor.list_runs(first.session_id)[-1].status == "suspended"

    reads = iter([before_suspend])
    load = executor.store.load_session
    monkeypatch.setattr(executor.store, "load_session", lambda session_id: next(reads, None) or load(session_id))
    continued = executor._continue_parked(first.session_id)  # the workers' sweep's entry
    assert continued is not None and continued.run_id == f"{first.session_id}-turn-2"
    assert continued.result(timeout_seconds=10).output == Out(answer='"Quito"')
    assert len(executor.list_runs(first.session_id)) == 2
