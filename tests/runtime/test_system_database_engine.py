"""DBOS's system-database engine as ``launch()`` configures it on PostgreSQL (issue 32).

DBOS pings a pooled connection on every checkout; a DBOS step checks out twice, so the pings were
about 40 of a run's 100 committed transactions and as many round trips. ``launch()`` turns the ping
off (``SYSTEM_DATABASE_ENGINE_KWARGS``), relying, as the store does, on SQLAlchemy invalidating a
pool's stale connections after the first disconnect and on DBOS retrying its system-database
operations. These tests pin the setting and check what it must not break: a run after every pooled
connection was killed under the pool (what a PostgreSQL restart does) still completes. The full
outages are in tests/durability and tests/chaos.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from helix_dbos import MockLLMAdapter, define_agent
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.launch import dbos_config_for, launch, shutdown

pytestmark = pytest.mark.postgres

REPLY = {"type": "text", "content": "hello", "should_stop": True, "stop_reason": "end_turn"}
agent = define_agent("engine-greeter", system_prompt="Greet.", llm_config="openai/none")


def _system_engine_pre_pings() -> bool:
    from dbos._dbos import _get_dbos_instance

    return bool(_get_dbos_instance()._sys_db.engine.pool._pre_ping)


@pytest.fixture
def launched(pg_database_url: str) -> Iterator[DBOSAgentExecutor]:
    executor = launch(pg_database_url, agents=[agent], llm_adapter=MockLLMAdapter([REPLY] * 4))
    try:
        yield executor
    finally:
        shutdown(executor)


def test_launch_does_not_ping_the_system_database_on_every_checkout(launched: DBOSAgentExecutor) -> None:
    assert _system_engine_pre_pings() is False


def test_a_run_completes_after_every_pooled_connection_was_killed(
    launched: DBOSAgentExecutor, pg_database_url: str
) -> None:
    assert launched.execute(agent, "hi", session_id="before").result().status == "completed"
    with psycopg.connect(pg_database_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] > 0
    result = launched.execute(agent, "hi again", session_id="after").result(timeout_seconds=60)
    assert result.status == "completed"


def test_the_embedded_sqlite_default_keeps_the_engine_settings_of_dbos(tmp_path: Path) -> None:
    config = dbos_config_for(f"sqlite:///{tmp_path}/helix.sqlite")
    assert "db_engine_kwargs" not in config
