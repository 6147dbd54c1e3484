"""The ``SessionStore`` contract: one suite every store implementation passes, on every backend.

As langgraph's checkpoint conformance tests do it: a behaviour that differs between backends is a
bug in one of them. helix-dbos runs it on SQLite and PostgreSQL (``tests/store/test_store_contract.py``);
a third-party :class:`~helix_dbos.store.base.SessionStore` runs the same suite by subclassing
:class:`SessionStoreContract` in one of its test modules and providing a ``store`` fixture that
yields an empty store for each test::

    # tests/test_my_store.py
    import pytest
    from helix_dbos.testing.store_contract import SessionStoreContract

    @pytest.fixture
    def store(tmp_path):
        store = MyStore(tmp_path / "db")
        yield store
        store.close()

    class TestMyStore(SessionStoreContract):
        pass

The fixture may be parametrized (helix-dbos's runs every test once per backend). Several tests
call the store from many threads at once (concurrent creators, concurrent starts, concurrent
identical commits): the store must be safe to share between threads, as the runtime shares it.
Requires pytest (a test dependency, not a dependency of helix-dbos); this module is not imported by
``helix_dbos.testing``'s ``__init__`` for that reason.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from helix_dbos.checkpoint import parse_checkpoint_id
from helix_dbos.errors import (
    AgentAlreadyRunningError,
    AgentNotResumableError,
    ExecutorSupersededError,
    HelixError,
    PendingToolCallNotFoundError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    StaleStateError,
    ToolCallAlreadyAnsweredError,
)
from helix_dbos.messages import (
    AssistantMessage,
    Message,
    ThinkingContent,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from helix_dbos.session import InterruptContext, SubSessionRef
from helix_dbos.store.base import (
    CommitResult,
    PendingToolCall,
    SessionStore,
    StartRun,
    StartRunResult,
    StepCommit,
    UsageRecord,
)

__all__ = ["SessionStoreContract", "commit", "finish", "now", "pending_call", "race", "start", "tool_step"]

T = TypeVar("T")

_clock = itertools.count(1_700_000_000_000, 1000)


def now() -> int:
    """A strictly increasing fake clock, so ordering by time is deterministic."""
    return next(_clock)


def start(
    store: SessionStore,
    session_id: str = "s1",
    run_id: str = "r1",
    *,
    new: bool = True,
    text: str = "hello",
    **kwargs: Any,
) -> StartRunResult:
    return store.start_run(
        StartRun(
            session_id=session_id,
            run_id=run_id,
            workflow_id=f"wf-{run_id}",
            agent_type="tester",
            new_session_state={"n": 0} if new else None,
            input_messages=[UserMessage(content=text)],
            now_ms=now(),
            **kwargs,
        )
    )


def commit(
    store: SessionStore,
    step: int,
    first_sequence: int,
    messages: list[Message],
    *,
    session_id: str = "s1",
    run_id: str = "r1",
    state: dict[str, Any] | None = None,
    usage: list[UsageRecord] | None = None,
    **kwargs: Any,
) -> CommitResult:
    return store.commit_step(
        StepCommit(
            session_id=session_id,
            run_id=run_id,
            step_count=step,
            first_sequence=first_sequence,
            messages=messages,
            custom_state=state if state is not None else {"n": step},
            usage=usage or [],
            now_ms=now(),
            **kwargs,
        )
    )


def tool_step(call_id: str) -> list[Message]:
    return [
        AssistantMessage(tool_calls=[ToolCallRequest(id=call_id, name="search", arguments={"z": 1, "a": 2})]),
        ToolResultMessage(tool_call_id=call_id, tool_name="search", content='{"ok": true}'),
    ]


def finish(store: SessionStore, step: int, first_sequence: int, **kwargs: Any) -> CommitResult:
    return commit(
        store,
        step,
        first_sequence,
        [AssistantMessage(content="done")],
        session_status="completed",
        run_status="completed",
        checkpoint_status="completed",
        output={"answer": 42},
        **kwargs,
    )


def pending_call(call_id: str, *, deadline_ms: int | None = None) -> PendingToolCall:
    """An approval-gated call of run ``r1`` in session ``s1``."""
    return PendingToolCall(
        session_id="s1",
        tool_call_id=call_id,
        run_id="r1",
        workflow_id="wf-r1",
        tool_name="deploy",
        kind="approval",
        arguments={"env": "prod"},
        arguments_digest="digest",
        deadline_ms=deadline_ms,
        created_at=now(),
    )


def race(n: int, fn: Callable[[int], T]) -> list[T | BaseException]:
    """Run ``fn(i)`` in ``n`` threads released together; collect results and exceptions."""
    barrier = threading.Barrier(n)
    results: list[T | BaseException] = [RuntimeError("not run")] * n

    def worker(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as error:
            results[i] = error

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


class SessionStoreContract:
    """The contract as pytest test methods over a ``store`` fixture the subclass's module provides.

    Each test expects an empty store (no sessions). Subclass it as ``Test<Something>`` so that
    pytest collects it; this base class itself is not collected.
    """

    # --- sessions ------------------------------------------------------------------------------------

    def test_create_session_and_read_it_back(self, store: SessionStore) -> None:
        created = store.create_session(
            "s1", agent_type="tester", custom_state={"k": [1, 2]}, now_ms=123, metadata={"tag": "x"}
        )
        assert created.status == "active"
        assert created.version == 1
        assert created.turn == 0
        assert created.stream_id == "s1"
        assert store.session_exists("s1")
        assert not store.session_exists("nope")
        assert store.load_session("s1") == created
        assert store.load_session("nope") is None
        with pytest.raises(SessionAlreadyExistsError):
            store.create_session("s1", agent_type="tester", custom_state={}, now_ms=124)

    def test_create_session_is_atomic_under_concurrency(self, store: SessionStore) -> None:
        results = race(10, lambda i: store.create_session("s1", agent_type=f"a{i}", custom_state={}, now_ms=1))
        winners = [r for r in results if not isinstance(r, BaseException)]
        losers = [r for r in results if isinstance(r, BaseException)]
        assert len(winners) == 1
        assert len(losers) == 9
        assert all(isinstance(e, SessionAlreadyExistsError) for e in losers), losers
        loaded = store.load_session("s1")
        assert loaded is not None
        assert loaded.agent_type == winners[0].agent_type

    def test_list_sessions_newest_first_with_status_filter(self, store: SessionStore) -> None:
        for i in range(3):
            store.create_session(f"s{i}", agent_type="tester", custom_state={}, now_ms=1000 + i)
        store.compare_and_set_status("s1", ["active"], "completed")
        assert [s.session_id for s in store.list_sessions(status="completed")] == ["s1"]
        listed = [s.session_id for s in store.list_sessions()]
        assert listed[0] == "s1"  # updated last
        assert sorted(listed) == ["s0", "s1", "s2"]
        assert len(store.list_sessions(limit=2)) == 2
        assert len(store.list_sessions(limit=2, offset=2)) == 1

    # --- compare-and-set -----------------------------------------------------------------------------

    def test_compare_and_set_status(self, store: SessionStore) -> None:
        store.create_session("s1", agent_type="tester", custom_state={}, now_ms=1)
        ok = store.compare_and_set_status("s1", ["active"], "paused", expected_version=1)
        assert ok.ok
        assert ok.new_version == 2

        wrong_status = store.compare_and_set_status("s1", ["active"], "completed")
        assert not wrong_status.ok
        assert wrong_status.current_status == "paused"
        assert wrong_status.current_version == 2

        stale = store.compare_and_set_status("s1", ["paused"], "active", expected_version=1)
        assert not stale.ok
        assert stale.current_version == 2

        context = InterruptContext(reason="user", step_count=3, timestamp=99)
        done = store.compare_and_set_status(
            "s1", ["paused"], "interrupted", expected_version=2, error="boom", interrupt_context=context
        )
        assert done.ok
        assert done.new_version == 3
        session = store.load_session("s1")
        assert session is not None
        assert (session.status, session.error, session.interrupt_context) == ("interrupted", "boom", context)

        with pytest.raises(SessionNotFoundError):
            store.compare_and_set_status("nope", ["active"], "paused")

    def test_increment_resume_count(self, store: SessionStore) -> None:
        store.create_session("s1", agent_type="tester", custom_state={}, now_ms=1)
        assert store.increment_resume_count("s1") == 1
        assert store.increment_resume_count("s1") == 2
        with pytest.raises(SessionNotFoundError):
            store.increment_resume_count("nope")

    # --- start_run -----------------------------------------------------------------------------------

    def test_start_run_creates_a_session(self, store: SessionStore) -> None:
        result = start(store, request_key="req-1", agent_fingerprint="fp")
        assert result.created_session
        assert not result.existing
        assert result.session.status == "active"
        assert (result.session.turn, result.session.version, result.session.message_count) == (1, 1, 1)
        assert result.session.run_id == "r1"
        assert result.session.custom_state == {"n": 0}
        assert result.run.turn == 1
        assert result.run.status == "running"
        assert result.run.start_sequence == 0
        assert store.get_run("r1") == result.run
        assert store.get_current_run("s1") == result.run
        assert store.get_message_prefix("s1", 10) == [UserMessage(content="hello")]

    def test_start_run_on_a_missing_session_without_state_fails(self, store: SessionStore) -> None:
        with pytest.raises(SessionNotFoundError):
            start(store, new=False)

    def test_start_run_on_a_created_session_starts_its_first_run(self, store: SessionStore) -> None:
        store.create_session("s1", agent_type="tester", custom_state={"n": 7}, now_ms=1)
        result = start(store, new=False)
        assert not result.created_session
        assert result.run.turn == 1
        assert result.session.custom_state == {"n": 7}

    def test_continuation_adds_a_turn(self, store: SessionStore) -> None:
        start(store)
        finish(store, 1, 1)
        second = start(store, run_id="r2", new=False, previous_run_id="r1", text="again")
        assert not second.created_session
        assert second.run.turn == 2
        assert second.run.start_sequence == 2
        assert second.run.previous_run_id == "r1"
        assert second.session.status == "active"
        assert second.session.output is None
        assert second.session.step_count == 0
        assert second.session.message_count == 3
        finish(store, 1, 3, run_id="r2")
        third = start(store, run_id="r3", new=False)
        assert [run.turn for run in store.list_runs("s1")] == [1, 2, 3]
        assert [run.run_id for run in store.list_runs("s1")] == ["r1", "r2", "r3"]
        assert store.get_current_run("s1") == third.run
        assert [m.content for m in store.get_message_prefix("s1", 100)] == [
            "hello",
            "done",
            "again",
            "done",
            "hello",
        ]

    def test_start_run_while_running_raises(self, store: SessionStore) -> None:
        start(store)
        with pytest.raises(AgentAlreadyRunningError):
            start(store, run_id="r2")
        with pytest.raises(AgentAlreadyRunningError):
            start(store, run_id="r2", new=False, allowed_statuses=["completed", "active"])

    def test_repeated_request_key_returns_the_existing_run_and_writes_nothing(self, store: SessionStore) -> None:
        first = start(store, request_key="req-1")
        before = store.load_session("s1")
        again = start(store, run_id="r-other", request_key="req-1")
        assert again.existing
        assert not again.created_session
        assert again.run == first.run
        assert store.load_session("s1") == before
        assert len(store.list_runs("s1")) == 1
        assert store.get_message_count("s1") == 1
        assert store.get_run("r-other") is None
        with pytest.raises(AgentAlreadyRunningError):
            start(store, run_id="r-other", request_key="req-2")

    def test_concurrent_start_run_on_a_new_session_has_one_winner(self, store: SessionStore) -> None:
        results = race(8, lambda i: start(store, run_id=f"r{i}"))
        winners = [r for r in results if isinstance(r, StartRunResult)]
        assert len(winners) == 1, results
        assert winners[0].created_session
        assert all(isinstance(r, AgentAlreadyRunningError) for r in results if r not in winners), results
        assert [run.turn for run in store.list_runs("s1")] == [1]
        assert store.get_message_count("s1") == 1

    def test_concurrent_continuations_have_one_winner_per_turn(self, store: SessionStore) -> None:
        start(store)
        finish(store, 1, 1)
        results = race(8, lambda i: start(store, run_id=f"c{i}", new=False))
        winners = [r for r in results if isinstance(r, StartRunResult)]
        assert len(winners) == 1, results
        assert all(isinstance(r, AgentAlreadyRunningError | StaleStateError) for r in results if r not in winners)
        runs = store.list_runs("s1")
        assert [run.turn for run in runs] == [1, 2]
        assert runs[1].run_id == winners[0].run.run_id
        assert store.get_message_count("s1") == 3

    def test_start_run_from_a_disallowed_status_raises(self, store: SessionStore) -> None:
        start(store)
        commit(
            store,
            1,
            1,
            [AssistantMessage(content="x")],
            session_status="failed",
            run_status="failed",
            checkpoint_status="failed",
            error="boom",
        )
        with pytest.raises(AgentNotResumableError):
            start(store, run_id="r2", new=False)
        resumed = start(store, run_id="r2", new=False, allowed_statuses=["failed"], mode="resume")
        assert resumed.run.mode == "resume"
        assert resumed.session.error is None

    def test_start_run_with_a_stale_expected_version_raises(self, store: SessionStore) -> None:
        start(store)
        done = finish(store, 1, 1)
        assert done.applied
        version = store.load_session("s1").version  # type: ignore[union-attr]
        with pytest.raises(StaleStateError) as raised:
            start(store, run_id="r2", new=False, expected_version=version - 1)
        assert (raised.value.expected_version, raised.value.actual_version) == (version - 1, version)
        ok = start(store, run_id="r2", new=False, expected_version=version)
        assert ok.session.version == version + 1

    def test_retry_truncates_to_a_checkpoint(self, store: SessionStore) -> None:
        start(store)
        first = commit(store, 1, 1, tool_step("c1"), state={"n": 1})
        commit(store, 2, 3, tool_step("c2"), state={"n": 2})
        commit(
            store,
            3,
            5,
            [AssistantMessage(content="bad")],
            state={"n": 3},
            session_status="failed",
            run_status="failed",
            checkpoint_status="failed",
            error="boom",
        )
        checkpoint = store.get_checkpoint(first.checkpoint_id)
        assert checkpoint is not None
        assert checkpoint.message_count == 3

        retry = start(
            store,
            run_id="r2",
            new=False,
            mode="retry",
            allowed_statuses=["failed"],
            truncate_to=checkpoint.message_count,
            reset_custom_state=checkpoint.state.custom_state,
            text="try again",
        )
        assert retry.run.start_sequence == 3
        assert retry.run.turn == 2
        assert retry.session.custom_state == {"n": 1}
        assert retry.session.message_count == 4
        transcript = store.get_message_prefix("s1", 100)
        assert len(transcript) == 4
        assert transcript[:3] == checkpoint.state.messages
        assert transcript[3] == UserMessage(content="try again")
        remaining = store.list_checkpoints("s1")
        assert [item.id for item in remaining.items] == [first.checkpoint_id]
        with pytest.raises(HelixError):
            start(store, run_id="r3", new=False, allowed_statuses=["active"], truncate_to=99)

    # --- commit_step ---------------------------------------------------------------------------------

    def test_commit_step_applies_everything(self, store: SessionStore) -> None:
        start(store)
        usage = [
            UsageRecord(kind="llm", name="gpt", step=1, input_tokens=10, output_tokens=5),
            UsageRecord(kind="tool", name="search", step=1, value=3.5),
            UsageRecord(kind="tool", name="search", step=1, value=4.0),  # same tool twice in one step
        ]
        result = commit(store, 1, 1, tool_step("c1"), state={"n": 1, "notes": ["a"]}, usage=usage, stream_sequence=7)
        assert result.applied
        assert not result.interrupt_requested
        session = store.load_session("s1")
        assert session is not None
        assert (session.step_count, session.message_count, session.version) == (1, 3, 2)
        assert session.custom_state == {"n": 1, "notes": ["a"]}
        assert session.status == "active"
        run = store.get_run("r1")
        assert run is not None
        assert (run.step_count, run.status) == (1, "running")
        assert store.get_usage("s1") == usage
        assert store.get_usage("s1", run_id="r1") == usage
        assert store.get_usage("s1", run_id="r2") == []
        checkpoint = store.get_latest_checkpoint("s1")
        assert checkpoint is not None
        assert checkpoint.id == result.checkpoint_id
        assert (checkpoint.step_count, checkpoint.message_count, checkpoint.stream_sequence) == (1, 3, 7)
        # Key order of tool arguments survives the round trip (prompt caches need identical bytes).
        assistant = store.get_message_prefix("s1", 3)[1]
        assert isinstance(assistant, AssistantMessage)
        assert assistant.tool_calls is not None
        assert list(assistant.tool_calls[0].arguments) == ["z", "a"]

    def test_commit_step_is_idempotent(self, store: SessionStore) -> None:
        start(store)
        usage = [UsageRecord(kind="llm", name="gpt", step=1, input_tokens=10)]
        first = commit(store, 1, 1, tool_step("c1"), usage=usage)
        before = store.load_session("s1")
        again = commit(store, 1, 1, tool_step("c1"), usage=usage)
        assert not again.applied
        assert again.checkpoint_id == first.checkpoint_id
        assert store.load_session("s1") == before
        assert store.get_message_count("s1") == 3
        assert len(store.get_message_prefix("s1", 100)) == 3
        assert store.get_usage("s1") == usage
        assert store.list_checkpoints("s1").total == 1

    def test_concurrent_identical_commits_apply_once(self, store: SessionStore) -> None:
        start(store)
        results = race(6, lambda i: commit(store, 1, 1, tool_step("c1")))
        done = [r for r in results if isinstance(r, CommitResult)]
        assert len(done) == 6, results
        assert sum(r.applied for r in done) == 1
        assert len({r.checkpoint_id for r in done}) == 1
        assert store.get_message_count("s1") == 3

    def test_commit_step_detects_a_sequence_gap_and_rolls_back(self, store: SessionStore) -> None:
        start(store)
        before = store.load_session("s1")
        with pytest.raises(HelixError, match="Sequence gap"):
            commit(store, 1, 5, tool_step("c1"))
        assert store.load_session("s1") == before
        assert store.list_checkpoints("s1").total == 0
        assert commit(store, 1, 1, tool_step("c1")).applied  # the rollback left the step free

    def test_commit_step_from_a_superseded_run_is_refused(self, store: SessionStore) -> None:
        start(store)
        finish(store, 1, 1)
        start(store, run_id="r2", new=False)
        with pytest.raises(ExecutorSupersededError):
            commit(store, 2, 3, tool_step("c1"), run_id="r1")
        with pytest.raises(SessionNotFoundError):
            commit(store, 1, 0, [], session_id="nope")

    def test_final_commit_sets_statuses_and_output(self, store: SessionStore) -> None:
        start(store)
        commit(store, 1, 1, tool_step("c1"))
        result = finish(store, 2, 3)
        assert result.applied
        session = store.load_session("s1")
        assert session is not None
        assert (session.status, session.output, session.step_count) == ("completed", {"answer": 42}, 2)
        run = store.get_run("r1")
        assert run is not None
        assert (run.status, run.step_count, run.completed_at is not None) == ("completed", 2, True)
        state = store.load_state("s1")
        assert state is not None
        assert state.status == "completed"
        assert state.output == {"answer": 42}
        assert len(state.messages) == 4
        assert store.list_checkpoints("s1").items[0].status == "completed"

    def test_finish_run(self, store: SessionStore) -> None:
        start(store)
        context = InterruptContext(reason="stop", step_count=0, timestamp=5)
        store.finish_run(
            "s1",
            "r1",
            session_status="interrupted",
            run_status="interrupted",
            interrupt_context=context,
            now_ms=now(),
        )
        session = store.load_session("s1")
        assert session is not None
        assert (session.status, session.interrupt_context, session.version) == ("interrupted", context, 2)
        run = store.get_run("r1")
        assert run is not None
        assert run.status == "interrupted"
        assert run.completed_at is not None

        # An old run's cleanup does not clobber the session's newer run.
        start(store, run_id="r2", new=False, allowed_statuses=["interrupted"])
        store.finish_run("s1", "r1", session_status="failed", run_status="failed", error="late", now_ms=now())
        session = store.load_session("s1")
        assert session is not None
        assert (session.status, session.run_id) == ("active", "r2")
        with pytest.raises(SessionNotFoundError):
            store.finish_run("nope", "r1", session_status="failed", run_status="failed", now_ms=now())

    # --- checkpoints ---------------------------------------------------------------------------------

    def test_checkpoint_ids_and_contents(self, store: SessionStore) -> None:
        start(store, session_id="team-a-s1")
        results = [
            commit(store, 1, 1, tool_step("c1"), session_id="team-a-s1"),
            commit(store, 2, 3, tool_step("c2"), session_id="team-a-s1"),
            finish(store, 3, 5, session_id="team-a-s1"),
        ]
        for step, result in enumerate(results, start=1):
            parsed = parse_checkpoint_id(result.checkpoint_id)
            assert parsed is not None
            assert (parsed.version, parsed.session_id, parsed.step_count) == (1, "team-a-s1", step)

        middle = store.get_checkpoint(results[1].checkpoint_id)
        assert middle is not None
        assert middle.message_count == 5
        assert middle.state.messages == store.get_message_prefix("team-a-s1", 5)
        assert middle.state.custom_state == {"n": 2}
        assert middle.state.status == "running"
        assert (middle.state.run_id, middle.state.agent_type, middle.state.stream_id) == (
            "r1",
            "tester",
            "team-a-s1",
        )
        assert store.get_checkpoint("cpv1-missing-s1-t1-abc") is None

        latest = store.get_latest_checkpoint("team-a-s1")
        assert latest is not None
        assert latest.id == results[2].checkpoint_id
        assert latest.state.status == "completed"
        assert latest.state.output == {"answer": 42}

        page = store.list_checkpoints("team-a-s1", limit=2)
        assert [item.step_count for item in page.items] == [3, 2]
        assert (page.total, page.has_more) == (3, True)
        rest = store.list_checkpoints("team-a-s1", offset=2, limit=2)
        assert [item.id for item in rest.items] == [results[0].checkpoint_id]
        assert not rest.has_more
        assert store.get_latest_checkpoint("nope") is None

    # --- messages ------------------------------------------------------------------------------------

    def test_get_messages_pagination_and_thinking(self, store: SessionStore) -> None:
        start(store)
        thinking = AssistantMessage(content="answer", thinking=ThinkingContent(content="hmm", signature="sig"))
        commit(store, 1, 1, [*tool_step("c1"), thinking, UserMessage(content="more")])
        assert store.get_message_count("s1") == 5

        page = store.get_messages("s1", offset=0, limit=2)
        assert (page.total, page.offset, page.limit, page.has_more) == (5, 0, 2, True)
        assert [m.role for m in page.messages] == ["user", "assistant"]
        last = store.get_messages("s1", offset=4, limit=2)
        assert [m.role for m in last.messages] == ["user"]
        assert not last.has_more
        assert store.get_messages("s1", offset=10).messages == []

        with_thinking = store.get_messages("s1", offset=3, limit=1).messages[0]
        assert with_thinking == thinking
        without = store.get_messages("s1", offset=3, limit=1, include_thinking=False).messages[0]
        assert isinstance(without, AssistantMessage)
        assert without.thinking is None
        assert without.content == "answer"

        empty = store.get_messages("nope")
        assert (empty.total, empty.messages, empty.has_more) == (0, [], False)

    def test_truncate_messages(self, store: SessionStore) -> None:
        start(store)
        commit(store, 1, 1, tool_step("c1"))
        store.truncate_messages("s1", 1)
        assert store.get_message_count("s1") == 1
        assert store.get_message_prefix("s1", 10) == [UserMessage(content="hello")]
        store.truncate_messages("s1", 5)  # beyond the end: nothing to do
        assert store.get_message_count("s1") == 1

    def test_load_state(self, store: SessionStore) -> None:
        assert store.load_state("s1") is None
        start(store, parent_session_id="parent")
        commit(store, 1, 1, tool_step("c1"), state={"n": 1})
        ref = SubSessionRef(sub_session_id="child", agent_type="helper", parent_tool_call_id="c1", started_at=5)
        store.add_sub_session_refs("s1", [ref])
        state = store.load_state("s1")
        assert state is not None
        assert (state.session_id, state.run_id, state.status, state.step_count) == ("s1", "r1", "running", 1)
        assert state.custom_state == {"n": 1}
        assert state.parent_session_id == "parent"
        assert state.sub_session_refs == [ref]
        assert state.messages == store.get_message_prefix("s1", 3)

    # --- interrupts ----------------------------------------------------------------------------------

    def test_interrupt_flag_round_trip(self, store: SessionStore) -> None:
        assert not store.request_interrupt("s1", "nope", now_ms=now())
        start(store)
        assert not commit(store, 1, 1, tool_step("c1")).interrupt_requested

        assert store.request_interrupt("s1", "user pressed stop", now_ms=now())
        seen = commit(store, 2, 3, tool_step("c2"))
        assert seen.interrupt_requested
        assert seen.interrupt_reason == "user pressed stop"
        session = store.load_session("s1")
        assert session is not None
        assert session.interrupt_context is not None
        assert session.interrupt_context.step_count == 1  # the step the session was at when asked
        # A re-executed commit reports the flag too.
        assert commit(store, 2, 3, tool_step("c2")).interrupt_requested

        store.clear_interrupt("s1")
        assert not commit(store, 3, 5, tool_step("c3")).interrupt_requested

        assert store.request_interrupt("s1", None, now_ms=now())
        final = commit(
            store,
            4,
            7,
            [],
            session_status="interrupted",
            run_status="interrupted",
            checkpoint_status="interrupted",
        )
        assert final.applied
        assert not final.interrupt_requested  # ending the run clears the flag
        assert not store.request_interrupt("s1", "too late", now_ms=now())

    # --- sub-sessions, deletion ----------------------------------------------------------------------

    def test_sub_session_refs(self, store: SessionStore) -> None:
        store.create_session("s1", agent_type="tester", custom_state={}, now_ms=1)
        refs = [
            SubSessionRef(sub_session_id="c1", agent_type="helper", parent_tool_call_id="t1", started_at=10),
            SubSessionRef(
                sub_session_id="c2",
                agent_type="helper",
                parent_tool_call_id="t2",
                started_at=11,
                mode="persistent",
            ),
        ]
        store.add_sub_session_refs("s1", refs)
        store.add_sub_session_refs("s1", refs[:1])  # a re-executed step adds nothing
        store.update_sub_session_ref("s1", "c1", status="completed", completed_at=20)
        loaded = store.get_sub_session_refs("s1")
        assert loaded == [refs[0].model_copy(update={"status": "completed", "completed_at": 20}), refs[1]]
        assert store.get_sub_session_refs("other") == []

    def test_delete_session_removes_everything(self, store: SessionStore) -> None:
        start(store)
        commit(store, 1, 1, tool_step("c1"), usage=[UsageRecord(kind="llm", name="m", step=1)])
        store.add_sub_session_refs(
            "s1", [SubSessionRef(sub_session_id="c", agent_type="a", parent_tool_call_id="t", started_at=1)]
        )
        start(store, session_id="s2", run_id="r9")  # an unrelated session survives
        store.delete_session("s1")
        assert not store.session_exists("s1")
        assert store.load_state("s1") is None
        assert store.list_runs("s1") == []
        assert store.get_run("r1") is None
        assert store.get_messages("s1").total == 0
        assert store.get_message_prefix("s1", 10) == []
        assert store.list_checkpoints("s1").total == 0
        assert store.get_usage("s1") == []
        assert store.get_sub_session_refs("s1") == []
        assert store.session_exists("s2")
        store.delete_session("s1")  # deleting twice is fine

    # --- pending tool calls (``store.pending``) ---------------------------------------------------

    def test_pending_calls_are_answered_exactly_once(self, store: SessionStore) -> None:
        start(store)
        store.pending.register([pending_call("t1"), pending_call("t2")])
        store.pending.register([pending_call("t1")])  # a re-executed step registers nothing new
        assert [c.tool_call_id for c in store.pending.open_calls("s1")] == ["t1", "t2"]
        first = store.pending.submit("s1", "t1", {"approved": True})
        assert (first.call.status, first.delivery, first.batch_complete) == ("answered", "hot", False)
        with pytest.raises(ToolCallAlreadyAnsweredError):
            store.pending.submit("s1", "t1", {"approved": False})
        with pytest.raises(PendingToolCallNotFoundError):
            store.pending.submit("s1", "nope", {})
        with pytest.raises(SessionNotFoundError):
            store.pending.submit("other", "t1", {})
        parked = store.pending.park("s1", "r1")
        assert {c.tool_call_id: c.delivery for c in parked} == {"t1": "hot", "t2": "parked"}
        last = store.pending.submit("s1", "t2", {"approved": False})
        assert (last.delivery, last.batch_complete) == ("parked", True)
        store.pending.mark_applied("s1", ["t1", "t2"])
        store.pending.mark_applied("s1", ["t1"])  # idempotent
        calls = store.pending.get("s1")
        assert [(c.status, c.submission) for c in calls] == [
            ("applied", {"approved": True}),
            ("applied", {"approved": False}),
        ]
        assert store.pending.get("s1", ["t2"]) == calls[1:]

    def test_pending_calls_expire_and_cancel(self, store: SessionStore) -> None:
        start(store)
        store.pending.register([pending_call("t1", deadline_ms=100), pending_call("t2"), pending_call("t3")])
        assert store.pending.expire("s1", ["t1", "t2"], 50) == []  # not due yet
        store.pending.park("s1", "r1")
        assert [c.tool_call_id for c in store.pending.expired_parked(100)] == ["t1"]
        assert store.pending.expire("s1", ["t1", "t2"], 100) == ["t1"]
        assert store.pending.expire("s1", ["t1"], 200) == []  # once
        assert store.pending.expired_parked(200) == []
        assert sorted(store.pending.cancel_open("s1")) == ["t2", "t3"]
        assert store.pending.open_calls("s1") == []
        assert [c.status for c in store.pending.get("s1")] == ["expired", "cancelled", "cancelled"]

    # --- workers (``store.workers``) --------------------------------------------------------------

    def test_worker_heartbeats_and_dead_worker_claims(self, store: SessionStore) -> None:
        store.workers.heartbeat("w1", "v1", 1_000)
        store.workers.heartbeat("w2", "v1", 1_000)
        store.workers.heartbeat("w3", "v2", 1_000)
        store.workers.heartbeat("w1", "v1", 5_000)
        assert {w.executor_id: w.heartbeat_at for w in store.workers.list_workers()} == {
            "w1": 5_000,
            "w2": 1_000,
            "w3": 1_000,
        }
        # Only the same app version's stale workers, and each one once.
        assert store.workers.claim_dead(me="w1", app_version="v1", now_ms=6_000, dead_after_ms=2_000) == ["w2"]
        assert store.workers.claim_dead(me="w1", app_version="v1", now_ms=6_000, dead_after_ms=2_000) == []
        claimed = {w.executor_id: w for w in store.workers.list_workers()}["w2"]
        assert (claimed.recovered_by, claimed.recovered_at) == ("w1", 6_000)
        store.workers.heartbeat("w2", "v1", 7_000)  # it came back: the claim is cleared
        back = {w.executor_id: w for w in store.workers.list_workers()}["w2"]
        assert (back.recovered_by, back.recovered_at) == (None, None)
