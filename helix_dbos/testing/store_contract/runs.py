"""The run contract: ``start_run`` (one winner, request keys, retries) and ``finish_run``."""

from __future__ import annotations

import pytest

from helix_dbos.errors import (
    AgentAlreadyRunningError,
    AgentNotResumableError,
    HelixError,
    RunIdConflictError,
    SessionNotFoundError,
    StaleStateError,
)
from helix_dbos.messages import AssistantMessage, UserMessage
from helix_dbos.session import InterruptContext
from helix_dbos.store.base import SessionStore, StartRunResult
from helix_dbos.testing.store_contract.helpers import commit, finish, now, race, start, tool_step

__all__ = ["RunContract"]


class RunContract:
    """Opening and ending runs (a ``store`` fixture yields an empty store)."""

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

    def test_a_run_id_taken_by_another_run_is_a_typed_refusal_that_writes_nothing(self, store: SessionStore) -> None:
        start(store)
        with pytest.raises(RunIdConflictError) as raised:  # a new session whose run id is taken
            start(store, "s2", "r1")
        assert (raised.value.code, raised.value.run_id, raised.value.session_id) == ("state_conflict", "r1", "s2")
        assert "SELECT" not in str(raised.value) and "INSERT" not in str(raised.value)
        assert store.load_session("s2") is None
        finish(store, 1, 1)
        before = store.load_session("s1")
        with pytest.raises(RunIdConflictError):  # the next turn of a session, under a taken run id
            start(store, new=False, text="again")
        assert store.load_session("s1") == before
        assert before is not None and before.turn == 1

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
