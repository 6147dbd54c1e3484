"""``execute`` on a session id it has not seen: one statement, no read first, and the old rules on a race.

The start guesses the session is new and writes it in one statement whose insert is the guard
(``RunStarter._start_new_session``). Two starts racing on one new id: the insert lets exactly one
in; the other's statement writes nothing and it goes the way of before, reading the session the
winner made: the same request gets the winner's run, another gets ``AgentAlreadyRunningError``
(the ``reject`` policy), as when two transactions raced. The rules for an existing session (its
tenant, its agent, an idempotency key) are decided on that path, from the row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SqlSessionStore, define_agent, define_tool
from helix_dbos.errors import AgentAlreadyRunningError, AgentMismatchError, SessionNotFoundError
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.starting import RunStarter
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.stream.sql import SqlStreamManager
from tests.round_trips import counting

pytestmark = pytest.mark.postgres

gate = threading.Event()
"""Holds every run in its tool call until set: a run stays in flight while its session is raced."""

agent = define_agent(
    "new-session",
    system_prompt="Wait.",
    llm_config="scripted/new",
    tools=[define_tool("wait", execute=lambda inp, ctx: {"ok": gate.wait(30)})],
)
other = define_agent("new-session-other", system_prompt="Other.", llm_config="scripted/new")


def model(runs: int, *, at_once: bool = False) -> MockLLMAdapter:
    """A script of ``runs`` runs, each calling ``wait`` once and then answering.

    The script is one queue for every run of the executor: runs one after the other take
    ``call, done`` in turn; with ``at_once`` every run's first model call comes before any run's
    second (all of them held at the gate), so each of them first takes a ``call``.
    """
    call = ToolCallsStepResult(tool_calls=[ParsedToolCall(id="w", name="wait", arguments={})], stop_reason="tool_use")
    done = TextStepResult(content="done", should_stop=True, stop_reason="end_turn")
    return MockLLMAdapter([call] * runs + [done] * runs if at_once else [call, done] * runs)


Factory = Callable[[MockLLMAdapter], DBOSAgentExecutor]


@pytest.fixture
def make(runtime_db: str) -> Iterator[Factory]:
    """Executors whose stream manager shares the store's engine (as ``launch`` builds them)."""
    made: list[tuple[DBOSAgentExecutor, SqlStreamManager]] = []
    gate.clear()

    def factory(llm: MockLLMAdapter) -> DBOSAgentExecutor:
        store = SqlSessionStore(runtime_db)
        manager = SqlStreamManager(store.engine)
        executor = DBOSAgentExecutor(store, llm_adapter=llm, agents=[agent, other], stream_manager=manager)
        made.append((executor, manager))
        return executor

    yield factory
    gate.set()
    for executor, manager in made:
        executor.close()
        background_loop.run(manager.aclose())
        executor.store.close()


def _race(executor: DBOSAgentExecutor, session_id: str, inputs: tuple[str, str]) -> list[Any]:
    """Both starts at once, released together; each one's handle or the error it raised."""
    barrier = threading.Barrier(2)

    def start(text: str) -> Any:
        barrier.wait()
        try:
            return executor.execute(agent, text, session_id=session_id)
        except AgentAlreadyRunningError as error:
            return error

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(start, inputs))


@pytest.mark.parametrize("trial", range(4))
def test_two_starts_of_one_new_session_let_exactly_one_in(make: Factory, trial: int) -> None:
    executor = make(model(2, at_once=True))  # both winners held in flight while their sessions are raced
    same = _race(executor, f"race-same-{trial}", ("go", "go"))
    # The same request: the loser gets the winner's run, as a repeated request always did.
    assert all(not isinstance(h, Exception) for h in same), same
    assert same[0].run_id == same[1].run_id
    different = _race(executor, f"race-diff-{trial}", ("go", "stop"))
    refused = [h for h in different if isinstance(h, AgentAlreadyRunningError)]
    started = [h for h in different if not isinstance(h, Exception)]
    assert len(refused) == 1 and len(started) == 1, different
    gate.set()
    for handle in (same[0], started[0]):
        assert handle.result(timeout_seconds=60).status == "completed"
    for session_id in (f"race-same-{trial}", f"race-diff-{trial}"):
        runs = executor.store.list_runs(session_id)
        assert [(r.turn, r.status) for r in runs] == [(1, "completed")]
        messages = executor.store.get_messages(session_id).messages
        assert [m.role for m in messages].count("user") == 1  # the loser wrote no input of its own


def test_the_rules_of_an_existing_session_hold_without_the_read_first(make: Factory) -> None:
    """Tenant, agent, idempotency key and a run in flight: decided on the row, after the failed guess."""
    executor = make(model(2, at_once=True))  # both runs held in flight until the gate opens
    mine = executor.execute(agent, "go", session_id="rules-1", tenant="acme")
    with pytest.raises(SessionNotFoundError):  # another tenant's session is not there for this one
        executor.execute(agent, "go", session_id="rules-1", tenant="globex")
    with pytest.raises(AgentMismatchError):
        executor.execute(other, "go", session_id="rules-1")
    with pytest.raises(AgentAlreadyRunningError):
        executor.execute(agent, "something else", session_id="rules-1", tenant="acme")
    keyed = executor.execute(agent, "go", idempotency_key="rules-key")
    with counting(executor.store.engine) as trips:
        again = executor.execute(agent, "go", idempotency_key="rules-key")
    assert again.run_id == keyed.run_id and again.session_id == keyed.session_id
    # The caller's own round trips: the keyed run's workflow thread reads its transcript meanwhile.
    caller = trips.on(threading.current_thread().name)
    assert caller[0].startswith("WITH new_session AS")  # the guess, failed; then the key found its run
    gate.set()
    assert mine.result(timeout_seconds=60).status == "completed"
    assert keyed.result(timeout_seconds=60).status == "completed"
    assert [r.turn for r in executor.store.list_runs("rules-1")] == [1]
    assert executor.store.load_session("rules-1").tenant == "acme"  # type: ignore[union-attr]


def test_a_keyed_start_whose_workflow_never_started_is_started_by_its_repeat(
    make: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statement committed but its caller never went on (an acknowledgement lost, a crash after it).

    The repeat's guess fails (the session exists) and its key finds the run: the repeat must start
    the run's workflow, as a repeat without a key does (``start_if_orphaned``), not hand back a run
    that never runs.
    """
    executor = make(model(1))
    gate.set()

    def lost(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the caller never heard back")

    monkeypatch.setattr(RunStarter, "_start_workflow", lost)
    with pytest.raises(ConnectionError):
        executor.execute(agent, "go", idempotency_key="orphan-key")
    monkeypatch.undo()
    handle = executor.execute(agent, "go", idempotency_key="orphan-key")
    assert handle.result(timeout_seconds=30).status == "completed"
    assert [r.turn for r in executor.store.list_runs(handle.session_id)] == [1]
