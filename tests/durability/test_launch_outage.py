"""``launch()`` rides out a database that drops out while it starts (a worker restarted mid-outage).

A process restarted by its supervisor while the database restarts must wait for the database, not
die: every worker dying during an outage turns a blip into an outage of the whole tier. The chaos
run found both windows: before DBOS launches (our migrations) and inside ``DBOS.launch()`` (its own
migrations, which it does not retry).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from helix_dbos import MockLLMAdapter, define_agent
from helix_dbos.runtime.launch import launch, shutdown
from tests import pg

pytestmark = pytest.mark.postgres

AGENT = define_agent("launch-outage", system_prompt="Answer.", llm_config="openai/fake")


def _model() -> MockLLMAdapter:
    return MockLLMAdapter([{"type": "text", "content": "up", "should_stop": True, "stop_reason": "end_turn"}])


def test_launch_waits_for_a_database_that_is_down_when_it_starts(crash_cluster: pg.LocalCluster) -> None:
    url = pg.create_database(crash_cluster.url, pg.unique_name("launch_down"))
    crash_cluster.crash()
    back = threading.Timer(2.0, crash_cluster.start)
    back.start()
    started = time.monotonic()
    executor = launch(url, agents=[AGENT], llm_adapter=_model())
    try:
        assert time.monotonic() - started >= 1.5  # it waited for the server, rather than failing
        assert executor.execute(AGENT, "hi").result(timeout_seconds=30).status == "completed"
    finally:
        back.join()
        shutdown(executor)


def test_launch_starts_dbos_again_when_the_database_drops_out_inside_its_launch(
    crash_cluster: pg.LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dbos._sys_db_postgres import PostgresSystemDatabase  # the window: DBOS's own migrations

    url = pg.create_database(crash_cluster.url, pg.unique_name("launch_drop"))
    original = PostgresSystemDatabase.run_migrations
    calls: list[int] = []

    def drops_once(self: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            lost = psycopg.OperationalError("server closed the connection unexpectedly")
            raise sa.exc.OperationalError("migrate", {}, lost)
        original(self)

    monkeypatch.setattr(PostgresSystemDatabase, "run_migrations", drops_once)
    executor = launch(url, agents=[AGENT], llm_adapter=_model())
    try:
        assert len(calls) == 2
        assert executor.execute(AGENT, "hi").result(timeout_seconds=30).status == "completed"
    finally:
        shutdown(executor)
