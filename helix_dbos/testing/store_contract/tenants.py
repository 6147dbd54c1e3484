"""The tenant contract: a session's tenant is set once, inherited by children and forks, and scopes reads."""

from __future__ import annotations

import pytest

from helix_dbos.errors import SessionNotFoundError
from helix_dbos.store.base import ForkSession, SessionStore, UsageRecord
from helix_dbos.tenancy import DEFAULT_TENANT
from helix_dbos.testing.store_contract.helpers import commit, finish, now, start, tool_step

__all__ = ["TenantContract"]


class TenantContract:
    """Tenants (a ``store`` fixture yields an empty store)."""

    def test_a_session_without_a_tenant_is_the_default_tenants(self, store: SessionStore) -> None:
        assert store.create_session("s0", agent_type="tester", custom_state={}, now_ms=1).tenant == DEFAULT_TENANT
        assert start(store).session.tenant == DEFAULT_TENANT

    def test_the_tenant_is_recorded_and_filters_listings(self, store: SessionStore) -> None:
        store.create_session("a1", agent_type="tester", custom_state={}, now_ms=1, tenant="acme")
        start(store, "a2", "ra2", tenant="acme")
        start(store, "g1", "rg1", tenant="globex")
        loaded = store.load_session("a2")
        assert loaded is not None and loaded.tenant == "acme"
        assert [s.session_id for s in store.list_sessions(tenant="acme")] == ["a2", "a1"]
        assert [s.session_id for s in store.list_sessions(tenant="globex")] == ["g1"]
        assert store.list_sessions(tenant="initech") == []
        assert len(store.list_sessions()) == 3

    def test_a_child_session_inherits_its_parents_tenant(self, store: SessionStore) -> None:
        start(store, "parent", "rp", tenant="acme")
        child = start(store, "child", "rc", parent_session_id="parent", root_session_id="parent")
        assert child.session.tenant == "acme"
        grandchild = start(store, "grandchild", "rg", parent_session_id="child", root_session_id="parent")
        assert grandchild.session.tenant == "acme"

    def test_a_fork_is_its_sources_tenants(self, store: SessionStore) -> None:
        start(store, tenant="acme")
        first = commit(store, 1, 1, tool_step("c1"))
        finish(store, 2, 3)
        forked = store.fork_session(
            ForkSession(source_session_id="s1", checkpoint_id=first.checkpoint_id, new_session_id="f1", now_ms=now())
        )
        assert forked.session.tenant == "acme"

    def test_another_tenant_cannot_reopen_a_session(self, store: SessionStore) -> None:
        start(store, tenant="acme")
        finish(store, 1, 1)
        before = store.load_session("s1")
        with pytest.raises(SessionNotFoundError):  # a new session's start that finds another tenant's row
            start(store, run_id="r2", tenant="globex")
        assert store.load_session("s1") == before
        again = start(store, run_id="r2", new=False, previous_run_id="r1", text="again", tenant="acme")
        assert again.run.turn == 2 and again.session.tenant == "acme"

    def test_tenant_spend_sums_its_sessions_usage_in_the_window(self, store: SessionStore) -> None:
        start(store, "a1", "ra1", tenant="acme")
        start(store, "a2", "ra2", tenant="acme")
        start(store, "g1", "rg1", tenant="globex")

        def usage(tokens: int, cost: float) -> list[UsageRecord]:
            return [UsageRecord(kind="llm", name="m", step=1, input_tokens=tokens, output_tokens=1, cost_usd=cost)]

        commit(store, 1, 1, tool_step("c1"), session_id="a1", run_id="ra1", usage=usage(10, 0.25))
        commit(store, 1, 1, tool_step("c2"), session_id="a2", run_id="ra2", usage=usage(20, 0.5))
        commit(store, 1, 1, tool_step("c3"), session_id="g1", run_id="rg1", usage=usage(1000, 9.0))
        spend = store.tenant_spend("acme")
        assert spend.total_tokens == 32
        assert spend.cost_usd == pytest.approx(0.75)
        assert store.tenant_spend("globex").total_tokens == 1001
        assert store.tenant_spend("acme", since_ms=now() + 10_000).total_tokens == 0
        assert store.tenant_spend("initech").cost_usd == 0.0
