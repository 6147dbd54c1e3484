"""The fork contract: ``fork_session`` copies a checkpoint into a new session that shares nothing mutable."""

from __future__ import annotations

import pytest

from helix_dbos.errors import CheckpointNotFoundError, ForkConflictError, SessionNotFoundError
from helix_dbos.messages import AssistantMessage, ToolResultMessage
from helix_dbos.store.base import ForkResult, ForkSession, SessionStore, UsageRecord
from helix_dbos.testing.store_contract.helpers import commit, finish, now, race, start, tool_step

__all__ = ["ForkContract"]


def _fork(store: SessionStore, checkpoint_id: str, new_session_id: str = "f1", **kwargs: object) -> ForkResult:
    return store.fork_session(
        ForkSession(
            source_session_id="s1",
            checkpoint_id=checkpoint_id,
            new_session_id=new_session_id,
            now_ms=now(),
            **kwargs,
        )
    )


def _two_steps_and_finish(store: SessionStore) -> list[str]:
    """Session ``s1``: a user message, two tool steps, a finish; returns the checkpoint ids by step."""
    start(store)
    usage = [UsageRecord(kind="llm", name="gpt", step=1, input_tokens=10, output_tokens=5)]
    first = commit(store, 1, 1, tool_step("c1"), state={"n": 1}, usage=usage)
    second = commit(store, 2, 3, tool_step("c2"), state={"n": 2})
    last = finish(store, 3, 5, state={"n": 3})
    return [first.checkpoint_id, second.checkpoint_id, last.checkpoint_id]


class ForkContract:
    """Forks (a ``store`` fixture yields an empty store)."""

    def test_a_fork_copies_the_checkpoint_and_nothing_after_it(self, store: SessionStore) -> None:
        step1, _, _ = _two_steps_and_finish(store)
        source_before = store.load_state("s1")
        result = _fork(store, step1)
        assert result.created and result.session_id == "f1" and result.checkpoint_id == step1
        fork = store.load_state("f1")
        assert fork is not None and source_before is not None
        assert fork.messages == source_before.messages[:3]  # the user message and step 1's two
        assert fork.custom_state == {"n": 1}
        assert (fork.status, fork.agent_type, fork.stream_id) == ("completed", "tester", "f1")
        session = store.load_session("f1")
        assert session is not None
        assert (session.turn, session.run_id, session.message_count, session.step_count) == (0, None, 3, 1)
        assert session.forked_from == {
            "session_id": "s1",
            "checkpoint_id": step1,
            "fork_checkpoint_id": result.fork_checkpoint_id,
        }
        assert store.list_runs("f1") == [] and store.get_usage("f1") == []
        own = store.get_latest_checkpoint("f1")
        assert own is not None and own.id == result.fork_checkpoint_id
        assert (own.session_id, own.step_count, own.message_count) == ("f1", 1, 3)
        assert own.state.messages == fork.messages and own.state.custom_state == {"n": 1}
        assert store.load_state("s1") == source_before  # the source is not written

    def test_a_fork_shares_nothing_mutable_with_its_source(self, store: SessionStore) -> None:
        step1, _, _ = _two_steps_and_finish(store)
        _fork(store, step1)
        source_before = store.load_state("s1")
        # Continue the fork: a new run, a step, a retry truncating its transcript.
        start(store, "f1", "fr1", new=False, text="and then?")
        commit(store, 1, 4, tool_step("x1"), session_id="f1", run_id="fr1", state={"n": 100})
        store.truncate_messages("f1", 2)
        assert store.load_state("s1") == source_before
        # ... and the source's later runs leave the fork alone.
        fork_before = store.load_state("f1")
        start(store, "s1", "r2", new=False, text="more")
        store.truncate_messages("s1", 1)
        assert store.load_state("f1") == fork_before

    def test_extra_messages_close_the_transcript_and_the_status_is_kept(self, store: SessionStore) -> None:
        start(store)
        waiting = AssistantMessage(tool_calls=tool_step("c1")[0].tool_calls)  # type: ignore[union-attr]
        suspended = commit(store, 1, 1, [waiting], checkpoint_status="suspended_client_tool")
        closing = ToolResultMessage(tool_call_id="c1", tool_name="search", content="not answered")
        result = _fork(store, suspended.checkpoint_id, extra_messages=[closing], status="failed")
        fork = store.load_state("f1")
        assert fork is not None and fork.messages[-1] == closing and len(fork.messages) == 3
        assert fork.status == "failed" and result.session.message_count == 3
        own = store.get_checkpoint(result.fork_checkpoint_id)
        assert own is not None and own.message_count == 3 and own.state.messages == fork.messages

    def test_a_repeat_returns_the_same_fork_and_writes_nothing(self, store: SessionStore) -> None:
        step1, step2, _ = _two_steps_and_finish(store)
        first = _fork(store, step1)
        start(store, "f1", "fr1", new=False, text="continued")
        again = _fork(store, step1)
        assert not again.created
        assert again.session_id == "f1" and again.fork_checkpoint_id == first.fork_checkpoint_id
        assert again.session.turn == 1  # the fork as it is now
        with pytest.raises(ForkConflictError):
            _fork(store, step2)  # the same id for another checkpoint
        with pytest.raises(ForkConflictError):
            _fork(store, step1, new_session_id="s1")  # an id that is not a fork at all

    def test_concurrent_identical_forks_make_one(self, store: SessionStore) -> None:
        step1, _, _ = _two_steps_and_finish(store)
        results = race(4, lambda _: _fork(store, step1))
        assert all(isinstance(r, ForkResult) for r in results), results
        assert sum(r.created for r in results if isinstance(r, ForkResult)) == 1
        assert store.get_message_count("f1") == 3

    def test_unknown_source_or_checkpoint_is_refused(self, store: SessionStore) -> None:
        step1, _, _ = _two_steps_and_finish(store)
        start(store, "other", "o1")
        other = commit(store, 1, 1, tool_step("o"), session_id="other", run_id="o1")
        with pytest.raises(SessionNotFoundError):
            store.fork_session(
                ForkSession(source_session_id="nope", checkpoint_id=step1, new_session_id="f", now_ms=now())
            )
        with pytest.raises(CheckpointNotFoundError):
            _fork(store, "cpv1-s1-s9-t1-abc")
        with pytest.raises(CheckpointNotFoundError):
            _fork(store, other.checkpoint_id)  # a checkpoint of another session
        assert store.load_session("f1") is None and store.load_session("f") is None
