"""The contract of ``store.pending`` (pending tool calls) and ``store.workers`` (heartbeats)."""

from __future__ import annotations

import pytest

from helix_dbos.errors import PendingToolCallNotFoundError, SessionNotFoundError, ToolCallAlreadyAnsweredError
from helix_dbos.messages import AssistantMessage, Message, ToolCallRequest
from helix_dbos.session import SubSessionRef
from helix_dbos.store.base import PendingToolCall, SessionStore
from helix_dbos.testing.store_contract.helpers import commit, now, pending_call, start, tool_step

__all__ = ["PendingCallContract"]


class PendingCallContract:
    """Pending calls and worker heartbeats (a ``store`` fixture yields an empty store)."""

    # --- pending tool calls (``store.pending``) ---------------------------------------------------

    def test_a_tree_lists_and_owns_the_calls_of_its_sessions(self, store: SessionStore) -> None:
        start(store, "root", "root-r1")
        start(store, "kid", "kid-r1", parent_session_id="root", root_session_id="root")
        start(store, "grandkid", "gk-r1", parent_session_id="kid", root_session_id="root")
        start(store, "stranger", "st-r1")
        for session, run, call_id in [
            ("grandkid", "gk-r1", "ask"),
            ("kid", "kid-r1", "dup"),
            ("root", "root-r1", "dup"),
            ("stranger", "st-r1", "far"),
        ]:
            row = pending_call(call_id).model_copy(update={"session_id": session, "run_id": run})
            store.pending.register([row])
        listed = [(c.session_id, c.tool_call_id) for c in store.pending.open_calls_in_tree("root")]
        assert sorted(listed) == [("grandkid", "ask"), ("kid", "dup"), ("root", "dup")]
        assert sorted(c.session_id for c in store.pending.open_calls_in_tree("kid")) == ["grandkid", "kid"]
        assert store.pending.owner_in_tree("root", "ask") == "grandkid"
        assert store.pending.owner_in_tree("root", "dup") == "root"  # an id used twice: the root's own first
        store.pending.submit("root", "dup", {"approved": True})
        assert store.pending.owner_in_tree("root", "dup") == "kid"  # then the one still open
        assert store.pending.owner_in_tree("root", "far") is None  # another tree's call is not this tree's
        assert store.pending.owner_in_tree("kid", "ask") == "grandkid"
        assert store.pending.owner_in_tree("nobody", "ask") is None

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

    def test_a_step_commit_marks_the_answers_it_applies(self, store: SessionStore) -> None:
        """``StepCommit.applied_tool_call_ids``: the results and the ``applied`` flip commit together."""
        start(store)
        store.pending.register([pending_call("t1"), pending_call("t2"), pending_call("t3")])
        store.pending.submit("s1", "t1", {"approved": True})
        store.pending.submit("s1", "t2", {"approved": False})
        assert commit(store, 1, 1, tool_step("t1"), applied_tool_call_ids=["t1", "t3"]).applied
        again = commit(store, 1, 1, tool_step("t1"), applied_tool_call_ids=["t1", "t3"])
        assert not again.applied  # a re-executed commit: still marks (idempotent), changes nothing else
        assert [c.status for c in store.pending.get("s1")] == ["applied", "answered", "pending"]

    def test_submit_checks_the_call_in_its_transaction(self, store: SessionStore) -> None:
        start(store)
        store.pending.register([pending_call("t1"), pending_call("t2")])
        seen: list[str] = []

        def refuse(call: PendingToolCall) -> None:
            seen.append(call.status)
            raise ValueError("does not fit")

        with pytest.raises(ValueError):
            store.pending.submit("s1", "t1", {"approved": True}, refuse)
        assert seen == ["pending"]
        assert [c.status for c in store.pending.open_calls("s1")] == ["pending", "pending"]  # nothing written
        first = store.pending.submit("s1", "t1", {"approved": True}, lambda call: None)
        assert first.batch_complete is False
        session = store.load_session("s1")
        assert session is not None
        assert first.run is None or first.run.run_id == "r1"  # a store may leave them to the caller to read
        assert first.session in (None, session)
        with pytest.raises(ValueError):  # the check runs before the already-answered refusal
            store.pending.submit("s1", "t1", {"approved": True}, refuse)
        assert store.pending.submit("s1", "t2", {"approved": False}).batch_complete is True
        rows, read = store.pending.get_with_session("s1", ["t2", "t1"])
        assert (sorted(c.tool_call_id for c in rows), read) == (["t1", "t2"], store.load_session("s1"))
        assert store.pending.get_with_session("other", ["t1"]) == ([], None)

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

    def test_a_fresh_registration_replaces_the_finished_row_of_an_earlier_call_with_its_id(
        self, store: SessionStore
    ) -> None:
        """A later call's registration (``fresh``) replaces the row an earlier call left finished.

        Models reuse call ids across responses. Every operation then addresses the new call; a live
        row, and a row of the registering run's own registration, are kept.
        """
        start(store)
        first_calls = [pending_call("t1"), pending_call("t2"), pending_call("t3"), pending_call("t4", deadline_ms=100)]
        store.pending.register(first_calls)
        store.pending.submit("s1", "t1", {"approved": True})
        store.pending.submit("s1", "t3", {"approved": True})
        store.pending.mark_applied("s1", ["t3"])
        assert store.pending.expire("s1", ["t4"], 100) == ["t4"]
        assert store.pending.cancel_open("s1") == ["t2"]

        def later(call_id: str, run_id: str = "r2") -> PendingToolCall:
            return pending_call(call_id).model_copy(
                update={"run_id": run_id, "workflow_id": f"wf-{run_id}", "arguments": {"env": run_id}}
            )

        store.pending.register([later("t1"), later("t3"), later("t4")], fresh=True)
        rows = {c.tool_call_id: c for c in store.pending.get("s1")}
        assert {cid: (c.run_id, c.status, c.submission, c.arguments) for cid, c in rows.items()} == {
            "t1": ("r2", "pending", None, {"env": "r2"}),  # answered by r1: replaced
            "t2": ("r1", "cancelled", None, {"env": "prod"}),  # not called again: untouched
            "t3": ("r2", "pending", None, {"env": "r2"}),  # applied: replaced
            "t4": ("r2", "pending", None, {"env": "r2"}),  # expired: replaced
        }
        assert [c.tool_call_id for c in store.pending.open_calls("s1")] == ["t1", "t3", "t4"]
        first = store.pending.submit("s1", "t1", {"approved": False})
        assert (first.call.run_id, first.batch_complete) == ("r2", False)  # its batch is r2's calls

        store.pending.register([later("t1"), later("t3")], fresh=True)  # the same step once more
        assert [(c.status, c.submission) for c in store.pending.get("s1", ["t1"])] == [
            ("answered", {"approved": False})
        ]
        store.pending.register([later("t1", "r3"), later("t3", "r3")])  # a continuation takes the batch as it is
        assert [(c.run_id, c.status) for c in store.pending.get("s1", ["t1", "t3"])] == [
            ("r2", "answered"),
            ("r3", "pending"),
        ]
        store.pending.register([later("t3", "r4")], fresh=True)  # a live row is never replaced
        assert [(c.run_id, c.arguments) for c in store.pending.get("s1", ["t3"])] == [("r4", {"env": "r2"})]
        store.pending.mark_applied("s1", ["t1"])
        store.pending.register([later("t1")], fresh=True)  # the same run's later call: applied, replaced
        assert [(c.status, c.submission) for c in store.pending.get("s1", ["t1"])] == [("pending", None)]

    def test_complete_parked_batches_are_suspended_runs_with_every_call_final(self, store: SessionStore) -> None:
        """The sweep's backstop: sessions whose current run is ``suspended`` on a parked batch.

        Every call of the batch is final, the last answered at or before the cutoff; a run with a
        call still open, a run still ``running`` and a run a continuation replaced are never found.
        """
        everything = 2**62
        start(store)
        store.pending.register([pending_call("t1"), pending_call("t2")])
        store.pending.park("s1", "r1")
        store.pending.submit("s1", "t1", {"approved": True})
        assert store.pending.complete_parked_batches(everything) == []  # t2 open (and r1 running)
        suspend: list[Message] = [
            AssistantMessage(tool_calls=[ToolCallRequest(id=c, name="deploy", arguments={}) for c in ("t1", "t2")])
        ]
        commit(store, 1, 1, suspend, run_status="suspended", checkpoint_status="suspended_client_tool")
        assert store.pending.complete_parked_batches(everything) == []  # t2 still open
        store.pending.submit("s1", "t2", {"approved": False})
        last = max(c.answered_at or 0 for c in store.pending.get("s1"))
        assert store.pending.complete_parked_batches(last - 1) == []  # answered after the cutoff
        assert store.pending.complete_parked_batches(last) == ["s1"]
        assert store.pending.complete_parked_batches(everything, limit=0) == []

        start(store, "s2", "r2")  # a batch answered while its run still runs: not before it suspends
        s2_call = pending_call("u1").model_copy(update={"session_id": "s2", "run_id": "r2", "workflow_id": "wf-r2"})
        store.pending.register([s2_call])
        store.pending.park("s2", "r2")
        store.pending.submit("s2", "u1", {"approved": True})
        assert store.pending.complete_parked_batches(everything) == ["s1"]

        next_run = start(store, run_id="r3", new=False, mode="resume", allowed_statuses=["active"], text="go on")
        assert next_run.run.run_id == "r3"  # the continuation: r1 is no longer the session's current run
        assert store.pending.complete_parked_batches(everything) == []

    def test_children_past_deadline_are_the_active_children_of_running_refs_past_it(self, store: SessionStore) -> None:
        """The deadline sweep's query: children still ``active`` past their ref's ``deadline_ms``.

        Only refs still ``running``, oldest deadline first; an ended child, a closed ref and a ref
        without a deadline are never found.
        """
        start(store, "parent", "p-r1")
        for child in ("late", "later", "ended", "closed", "open-ended", "future"):
            start(store, child, f"{child}-r1", parent_session_id="parent", root_session_id="parent")

        def ref(child: str, deadline_ms: int | None) -> SubSessionRef:
            return SubSessionRef(
                sub_session_id=child,
                agent_type="helper",
                parent_tool_call_id=f"call-{child}",
                started_at=100,
                deadline_ms=deadline_ms,
            )

        refs = [ref("later", 600), ref("late", 500), ref("ended", 500), ref("closed", 500), ref("open-ended", None)]
        store.add_sub_session_refs("parent", [*refs, ref("future", 10_000)])
        store.finish_run("ended", "ended-r1", session_status="completed", run_status="completed", now_ms=now())
        store.update_sub_session_ref("parent", "closed", status="failed", completed_at=700)
        found = store.pending.children_past_deadline(1_000)
        assert [(parent, r.sub_session_id, r.deadline_ms) for parent, r in found] == [
            ("parent", "late", 500),
            ("parent", "later", 600),
        ]
        assert found[0][1] == refs[1]
        assert [r.sub_session_id for _, r in store.pending.children_past_deadline(550)] == ["late"]
        assert store.pending.children_past_deadline(1_000, limit=1) == found[:1]
        assert store.pending.children_past_deadline(499) == []

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
