"""The session contract: lifecycle, compare-and-set, transcript reads, child refs, deletion."""

from __future__ import annotations

import pytest

from helix_dbos.errors import SessionAlreadyExistsError, SessionNotFoundError
from helix_dbos.messages import AssistantMessage, ThinkingContent, UserMessage
from helix_dbos.session import InterruptContext, SubSessionRef
from helix_dbos.store.base import SessionStore, UsageRecord
from helix_dbos.testing.store_contract.helpers import commit, race, start, tool_step

__all__ = ["SessionContract"]


class SessionContract:
    """Sessions, their status and transcript (a ``store`` fixture yields an empty store)."""

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

    def test_list_sessions_of_one_agent(self, store: SessionStore) -> None:
        store.create_session("a1", agent_type="alpha", custom_state={}, now_ms=1000)
        store.create_session("b1", agent_type="beta", custom_state={}, now_ms=1001)
        store.create_session("a2", agent_type="alpha", custom_state={}, now_ms=1002)
        assert [s.session_id for s in store.list_sessions(agent_type="alpha")] == ["a2", "a1"]
        assert [s.session_id for s in store.list_sessions(agent_type="beta", status="active")] == ["b1"]
        assert store.list_sessions(agent_type="gamma") == []

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

    def test_usage_with_children_covers_sub_agent_sessions_at_any_depth(self, store: SessionStore) -> None:
        start(store)
        start(store, session_id="child", run_id="rc", parent_session_id="s1", root_session_id="s1")
        start(store, session_id="grandchild", run_id="rg", parent_session_id="child", root_session_id="s1")
        start(store, session_id="stranger", run_id="rx")
        tokens_of = (("s1", "r1", 1), ("child", "rc", 10), ("grandchild", "rg", 100), ("stranger", "rx", 7))
        for sid, rid, tokens in tokens_of:
            commit(
                store,
                1,
                1,
                tool_step(f"c-{sid}"),
                session_id=sid,
                run_id=rid,
                usage=[UsageRecord(kind="llm", name="m", step=1, input_tokens=tokens, cost_usd=tokens / 1000)],
            )
        own = store.get_usage("s1")
        assert [(r.session_id, r.run_id, r.input_tokens, r.cost_usd) for r in own] == [("s1", "r1", 1, 0.001)]
        tree = store.get_usage("s1", include_children=True)
        assert sorted((r.session_id, r.input_tokens) for r in tree) == [("child", 10), ("grandchild", 100), ("s1", 1)]
        assert [r.input_tokens for r in store.get_usage("child", include_children=True)] == [10, 100]
        assert store.get_usage("s1", run_id="r1", include_children=True) == own

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
