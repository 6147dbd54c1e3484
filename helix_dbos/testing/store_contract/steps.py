"""The step-commit contract: ``commit_step`` exactly once, checkpoints, the interrupt flag."""

from __future__ import annotations

import pytest

from helix_dbos.checkpoint import parse_checkpoint_id
from helix_dbos.errors import ExecutorSupersededError, HelixError, SessionNotFoundError
from helix_dbos.messages import AssistantMessage
from helix_dbos.store.base import CommitResult, SessionStore, UsageRecord
from helix_dbos.testing.store_contract.helpers import commit, finish, now, race, start, tool_step

__all__ = ["StepContract"]

_ROW_KEYS = {"session_id", "run_id", "created_at"}


class StepContract:
    """Step commits and what they leave (a ``store`` fixture yields an empty store)."""

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
        assert [UsageRecord.model_validate(r.model_dump(exclude=_ROW_KEYS)) for r in store.get_usage("s1")] == usage
        assert [(r.session_id, r.run_id) for r in store.get_usage("s1", run_id="r1")] == [("s1", "r1")] * 3
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
        assert [UsageRecord.model_validate(r.model_dump(exclude=_ROW_KEYS)) for r in store.get_usage("s1")] == usage
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
