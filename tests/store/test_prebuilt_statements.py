"""The statements every process repeats with no caller waiting are built once (issue 32).

The workers' sweep runs ``expired_parked``, ``parents_with_children_done``, the heartbeat and the
takeover claim every second in every process, busy or idle, and every run's end reads its usage
(the finalize step, then the result). Building such a statement is most of its CPU
(``parents_with_children_done``: four aliases and their column collections, about 2 ms a call
against 0.25 ms bound), so each is built once and bound per call. These pin that: two calls
execute the *same* statement object, and its answers still follow the arguments (so a statement
built once cannot be one bound to the first call's values).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from helix_dbos.store import SqlSessionStore
from helix_dbos.store.base import UsageRecord
from helix_dbos.testing.store_contract.helpers import commit, now, start, tool_step


@contextmanager
def executed(store: SqlSessionStore) -> Iterator[list[Any]]:
    """The statement objects ``store``'s engine executes inside the block, in order."""
    seen: list[Any] = []

    def record(conn: Any, clause: Any, *args: Any) -> None:
        seen.append(clause)

    event.listen(store.engine, "before_execute", record)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_execute", record)


def statement_of(store: SqlSessionStore, call: Callable[[], object]) -> Any:
    """The one statement ``call`` executes (selects and updates: a begin or a pragma is not it)."""
    with executed(store) as seen:
        call()
    selects = [s for s in seen if isinstance(s, (sa.Select, sa.Update))]
    assert len(selects) == 1, selects
    return selects[0]


def test_the_sweeps_reads_are_built_once(store: SqlSessionStore) -> None:
    for call in (
        lambda: store.pending.expired_parked(now()),
        lambda: store.pending.parents_with_children_done(),
        lambda: store.pending.parents_with_children_done(session_id="s1"),
        lambda: store.workers.renew("worker-1", "v1", now()),
        lambda: store.workers.claim_dead(me="worker-1", app_version="v1", now_ms=now(), dead_after_ms=30_000),
    ):
        assert statement_of(store, call) is statement_of(store, call)


def test_the_usage_read_is_built_once_and_follows_its_arguments(store: SqlSessionStore) -> None:
    for session_id, tokens in (("s1", 3), ("s2", 5)):
        start(store, session_id=session_id, run_id=f"r-{session_id}")
        usage = [UsageRecord(kind="llm", name="m", step=1, input_tokens=tokens)]
        commit(store, 1, 1, tool_step("c1"), session_id=session_id, run_id=f"r-{session_id}", usage=usage)

    def read(session_id: str, run_id: str | None) -> Callable[[], object]:
        return lambda: store.get_usage_unless_delegated(session_id, run_id=run_id)

    assert statement_of(store, read("s1", "r-s1")) is statement_of(store, read("s2", "r-s2"))
    assert statement_of(store, read("s1", None)) is statement_of(store, read("s2", None))
    one = store.get_usage_unless_delegated("s1", run_id="r-s1")
    other = store.get_usage_unless_delegated("s2")
    assert one is not None and [(r.session_id, r.input_tokens) for r in one] == [("s1", 3)]
    assert other is not None and [(r.session_id, r.input_tokens) for r in other] == [("s2", 5)]
    assert store.get_usage_unless_delegated("s1", run_id="r-s2") == []


def test_the_heartbeat_and_the_takeover_claim_still_follow_their_arguments(store: SqlSessionStore) -> None:
    store.workers.heartbeat("alive", "v1", 1_000)
    store.workers.heartbeat("dead", "v1", 1_000)
    store.workers.heartbeat("other-version", "v0", 1_000)
    assert store.workers.renew("alive", "v1", 50_000)
    assert not store.workers.renew("never-seen", "v1", 50_000)
    assert store.workers.claim_dead(me="alive", app_version="v1", now_ms=50_000, dead_after_ms=30_000) == ["dead"]
    assert store.workers.claim_dead(me="alive", app_version="v1", now_ms=50_000, dead_after_ms=30_000) == []
    found = {w.executor_id: w for w in store.workers.list_workers()}
    assert found["alive"].heartbeat_at == 50_000 and found["alive"].recovered_by is None
    assert found["dead"].recovered_by == "alive" and found["dead"].recovered_at == 50_000
    assert found["other-version"].recovered_at is None
