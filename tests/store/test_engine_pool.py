"""A PostgreSQL engine of helix-dbos keeps its connections warm and its statements' plans.

SQLAlchemy's default pool keeps 5 and opens up to 10 more, closing each again when it is handed
back. Under the 200-run load that was about one new connection per run: a new server process each
time, with cold catalog caches and no prepared statements. The most a pool holds stays 15. The
pool hands out the connection returned last, and PostgreSQL keeps one generic plan of a prepared
statement instead of planning it again on most executions (``helix_dbos.store.engine``).
"""

from __future__ import annotations

import threading

import sqlalchemy as sa
from sqlalchemy import event

from helix_dbos.store import SqlSessionStore
from helix_dbos.store.engine import POSTGRES_POOL, create_engine_for
from helix_dbos.testing.store_contract.helpers import commit, start, tool_step

_AT_ONCE = 12
"""Callers holding a connection at the same time: more than SQLAlchemy's default pool keeps."""


def _busy_round(engine: sa.Engine) -> None:
    """``_AT_ONCE`` threads each hold a connection until all of them have one."""
    everyone = threading.Barrier(_AT_ONCE, timeout=10)

    def hold() -> None:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
            everyone.wait()

    threads = [threading.Thread(target=hold) for _ in range(_AT_ONCE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)


def test_a_busy_store_reuses_its_connections(pg_store: SqlSessionStore) -> None:
    opened: list[object] = []
    event.listen(pg_store.engine.pool, "connect", lambda conn, record: opened.append(conn))
    for _ in range(3):
        _busy_round(pg_store.engine)
    assert len(opened) <= _AT_ONCE  # was 25: 12, then about 7 more each round (all but the 5 kept)


def test_the_pool_holds_no_more_than_before_and_a_caller_can_widen_it(pg_store_url: str) -> None:
    engine = create_engine_for(pg_store_url)
    try:
        assert (engine.pool.size(), engine.pool._max_overflow) == (15, 0)  # type: ignore[attr-defined]
        assert POSTGRES_POOL["pool_size"] + POSTGRES_POOL["max_overflow"] == 5 + 10  # SQLAlchemy's 5 kept + 10
    finally:
        engine.dispose()
    wider = create_engine_for(pg_store_url, pool_size=40)
    try:
        assert wider.pool.size() == 40  # type: ignore[attr-defined]
    finally:
        wider.dispose()


def test_the_pool_hands_out_the_connection_returned_last(pg_store_url: str) -> None:
    # The last one back is warm (its prepared statements made, its server process's caches hot);
    # SQLAlchemy's default hands out the one idle longest, so every pooled connection warms slowly.
    engine = create_engine_for(pg_store_url)
    try:
        held = [engine.connect() for _ in range(3)]
        backends = [conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() for conn in held]
        for conn in held:
            conn.close()
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() == backends[-1]  # was backends[0]
    finally:
        engine.dispose()


def test_the_step_commit_keeps_one_generic_plan(pg_store: SqlSessionStore, pg_store_url: str) -> None:
    # One connection, so every commit runs on it and its prepared statements can be read back there.
    engine = create_engine_for(pg_store_url, pool_size=1)
    try:
        store = SqlSessionStore(engine)
        start(store)
        for step in range(1, 13):  # psycopg prepares a statement once a connection has run it 5 times
            assert commit(store, step, 2 * step - 1, tool_step(f"c{step}")).applied
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "force_generic_plan"
            plans = conn.exec_driver_sql(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE starts_with(statement, 'WITH s AS')"
            ).all()
        assert plans, "psycopg prepared the step commit"
        # Was 5 or more custom plans: PostgreSQL plans a prepared statement afresh for its first five
        # executions, and then whenever it estimates a plan for the given values cheaper.
        assert [custom for _, custom in plans] == [0] * len(plans)
        assert sum(generic for generic, _ in plans) >= 1
    finally:
        engine.dispose()
