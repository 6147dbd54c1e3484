"""The contract of each optional store capability (:mod:`helix_dbos.store.capabilities`).

A store that offers a capability subclasses its contract next to :class:`SessionStoreContract`;
one that does not needs none of them (the runtime then takes the base protocol's path, which
``tests/runtime/test_base_protocol_backend.py`` runs end to end). What is tested is what the
runtime relies on: the joined work runs inside the store's transaction (an error in it rolls the
store's writes back and reaches the caller), it runs exactly when the capability says, and the
store's own result is what the base method would return.
"""

from __future__ import annotations

from typing import Any

import pytest

from helix_dbos.errors import ToolCallAlreadyAnsweredError
from helix_dbos.messages import UserMessage
from helix_dbos.session import SubSessionRef
from helix_dbos.store.base import PendingToolCall, SessionStore, StartRun, StepCommit, UsageRecord
from helix_dbos.store.capabilities import (
    JointCommitStore,
    JointStartStore,
    LeafUsageStore,
    NewSessionStart,
    TransactionalSubmit,
)
from helix_dbos.testing.store_contract.helpers import commit, now, pending_call, start, tool_step

__all__ = [
    "JointCommitContract",
    "JointStartContract",
    "LeafUsageContract",
    "NewSessionStartContract",
    "TransactionalSubmitContract",
]


class JoinedWorkFailed(Exception):
    """Raised by a test's joined work, to see the store's transaction roll back."""


def _joint_start(store: SessionStore) -> JointStartStore:
    assert isinstance(store, JointStartStore), "the store does not offer start_run_with (with engine)"
    return store


def _joint_commit(store: SessionStore) -> JointCommitStore:
    assert isinstance(store, JointCommitStore), "the store does not offer commit_step_with (with engine)"
    return store


def _transactional_submit(store: SessionStore) -> TransactionalSubmit:
    pending = store.pending
    assert isinstance(pending, TransactionalSubmit), "store.pending does not offer submit_with"
    return pending


def _start_request(session_id: str = "s1", run_id: str = "r1") -> StartRun:
    return StartRun(
        session_id=session_id,
        run_id=run_id,
        workflow_id=f"wf-{run_id}",
        agent_type="tester",
        new_session_state={"n": 0},
        input_messages=[UserMessage(content="hello")],
        request_key=f"key-{run_id}",
        now_ms=now(),
    )


def _step(step: int = 1, first_sequence: int = 1) -> StepCommit:
    return StepCommit(
        session_id="s1",
        run_id="r1",
        step_count=step,
        first_sequence=first_sequence,
        messages=tool_step(f"c{step}"),
        custom_state={"n": step},
        now_ms=now(),
    )


class JointStartContract:
    """``start_run_with``: a run's start with a stream's start in its transaction."""

    def test_the_stream_sequence_is_recorded_and_the_stream_started_once(self, store: SessionStore) -> None:
        joint = _joint_start(store)
        connections: list[object] = []

        def sequence(conn: Any) -> int:
            connections.append(conn)
            return 7

        def activate(conn: Any) -> None:
            connections.append(conn)

        first = joint.start_run_with(_start_request(), sequence, activate)
        assert (first.existing, first.run.stream_start_sequence) == (False, 7)
        assert len(connections) == 2 and connections[0] is connections[1]  # one transaction
        again = joint.start_run_with(_start_request(), lambda conn: 9, lambda conn: connections.append("again"))
        assert again.existing and again.run.stream_start_sequence == 7
        assert "again" not in connections  # a repeated request starts no stream
        assert store.get_current_run("s1") == first.run

    def test_an_error_in_the_joined_work_rolls_the_start_back(self, store: SessionStore) -> None:
        joint = _joint_start(store)

        def refuse(conn: Any) -> None:
            raise JoinedWorkFailed

        with pytest.raises(JoinedWorkFailed):
            joint.start_run_with(_start_request(), lambda conn: 3, refuse)
        assert store.load_session("s1") is None and store.get_run("r1") is None
        started = joint.start_run_with(_start_request(), lambda conn: 3, lambda conn: None)
        assert not started.existing and started.run.stream_start_sequence == 3


class NewSessionStartContract:
    """``start_new_session``: a new session's first run written whole, or nothing at all."""

    def test_a_new_session_starts_once_and_an_existing_one_is_left_alone(self, store: SessionStore) -> None:
        assert isinstance(store, NewSessionStart), "the store does not offer start_new_session (with engine)"
        started = store.start_new_session(_start_request())
        if started is None:  # a backend without the one write: nothing written, start_run's path instead
            assert store.load_session("s1") is None
            started = store.start_run(_start_request())
        assert started.created_session and not started.existing
        assert store.get_current_run("s1") == started.run
        loaded = store.load_session("s1")
        assert loaded is not None and (loaded.turn, loaded.run_id, loaded.message_count) == (1, "r1", 1)
        # The session exists now: another start of it writes nothing, whatever its request.
        assert store.start_new_session(_start_request(run_id="r2")) is None
        assert [r.run_id for r in store.list_runs("s1")] == ["r1"] and store.get_message_count("s1") == 1


class JointCommitContract:
    """``commit_step_with``: a step commit with another writer's rows in its transaction."""

    def test_the_result_is_the_commits_and_the_joined_work_runs_on_every_attempt(self, store: SessionStore) -> None:
        joint = _joint_commit(store)
        start(store)
        ran: list[object] = []
        commit = _step()
        first = joint.commit_step_with(commit, ran.append)
        assert first.applied and len(ran) == 1
        checkpoint = store.get_latest_checkpoint("s1")
        assert checkpoint is not None and checkpoint.id == first.checkpoint_id
        again = joint.commit_step_with(commit, ran.append)  # a re-executed commit
        assert again == store.commit_step(commit) and not again.applied
        assert again.checkpoint_id == first.checkpoint_id
        assert len(ran) == 2  # the rows written since still go with it

    def test_an_error_in_the_joined_work_rolls_the_step_back(self, store: SessionStore) -> None:
        joint = _joint_commit(store)
        start(store)

        def refuse(conn: Any) -> None:
            raise JoinedWorkFailed

        with pytest.raises(JoinedWorkFailed):
            joint.commit_step_with(_step(), refuse)
        session = store.load_session("s1")
        assert session is not None and (session.step_count, session.message_count) == (0, 1)
        assert store.get_latest_checkpoint("s1") is None
        assert store.commit_step(_step()).applied  # the slower path commits it after all


class TransactionalSubmitContract:
    """``store.pending.submit_with``: an answer with a hot run's wake-up in its transaction."""

    def test_the_joined_work_runs_for_a_hot_call_with_the_call_as_answered(self, store: SessionStore) -> None:
        pending = _transactional_submit(store)
        start(store)
        store.pending.register([pending_call("t1"), pending_call("t2")])
        woken: list[PendingToolCall] = []
        outcome = pending.submit_with("s1", "t1", {"approved": True}, None, lambda conn, call: woken.append(call))
        assert (outcome.delivery, outcome.batch_complete) == ("hot", False)
        assert [(c.tool_call_id, c.status, c.submission) for c in woken] == [("t1", "answered", {"approved": True})]
        with pytest.raises(ToolCallAlreadyAnsweredError):  # refusals are submit's
            pending.submit_with("s1", "t1", {"approved": False}, None, lambda conn, call: woken.append(call))
        store.pending.park("s1", "r1")
        parked = pending.submit_with("s1", "t2", {"approved": False}, None, lambda conn, call: woken.append(call))
        assert (parked.delivery, parked.batch_complete) == ("parked", True)
        assert len(woken) == 1  # a parked call has no waiting run to wake

    def test_an_error_in_the_joined_work_rolls_the_answer_back(self, store: SessionStore) -> None:
        pending = _transactional_submit(store)
        start(store)
        store.pending.register([pending_call("t1")])

        def refuse(conn: Any, call: PendingToolCall) -> None:
            raise JoinedWorkFailed

        with pytest.raises(JoinedWorkFailed):
            pending.submit_with("s1", "t1", {"approved": True}, None, refuse)
        assert [c.status for c in store.pending.get("s1")] == ["pending"]
        assert store.pending.submit("s1", "t1", {"approved": True}).call.status == "answered"

    def test_the_check_runs_before_the_joined_work(self, store: SessionStore) -> None:
        pending = _transactional_submit(store)
        start(store)
        store.pending.register([pending_call("t1")])
        woken: list[str] = []

        def does_not_fit(call: PendingToolCall) -> None:
            raise ValueError("does not fit")

        with pytest.raises(ValueError):
            pending.submit_with("s1", "t1", {}, does_not_fit, lambda conn, call: woken.append(call.tool_call_id))
        assert woken == [] and [c.status for c in store.pending.get("s1")] == ["pending"]


class LeafUsageContract:
    """``get_usage_unless_delegated``: ``get_usage`` in one read, or ``None`` once the session delegated."""

    def test_it_answers_get_usage_until_the_session_delegates(self, store: SessionStore) -> None:
        assert isinstance(store, LeafUsageStore), "the store does not offer get_usage_unless_delegated"
        assert store.get_usage_unless_delegated("s1") == []  # unknown: no usage, no references
        start(store)
        assert store.get_usage_unless_delegated("s1", run_id="r1") == []
        usage = [UsageRecord(kind="llm", name="m", step=1, input_tokens=3), UsageRecord(kind="tool", name="t", step=1)]
        commit(store, 1, 1, tool_step("c1"), usage=usage)
        for run_id in (None, "r1", "other"):
            assert store.get_usage_unless_delegated("s1", run_id=run_id) == store.get_usage("s1", run_id=run_id)
        assert store.get_usage_unless_delegated("s1")
        ref = SubSessionRef(sub_session_id="child", agent_type="helper", parent_tool_call_id="c1", started_at=5)
        store.add_sub_session_refs("s1", [ref])
        assert store.get_usage_unless_delegated("s1") is None
        assert store.get_usage_unless_delegated("s1", run_id="r1") is None
