"""A new session's one-statement start rides out a PostgreSQL restart that hits it mid-flight.

The start (``RunStarter._start_new_session``) is one autocommitted statement, retried whole by the
store on a transient error (``helix_dbos.store.retry``). Here the server crashes at the instant the
statement is about to go out and comes back two seconds later: the start must wait, then open the
run exactly once (one session, one run, the input once, the stream started), and the run complete.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos.runtime.aio import background_loop
from tests import pg
from tests.durability.harness import Env, agent, launched

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def env(crash_cluster: pg.LocalCluster) -> Iterator[Env]:
    with launched(crash_cluster) as env:
        yield env


def test_a_restart_mid_start_is_ridden_out_and_the_run_opened_once(env: Env) -> None:
    engine = env.executor.store.engine
    outages: list[Any] = []

    def crash_on_the_start(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith("WITH new_session AS ( INSERT INTO helix_sessions") and not outages:
            outages.append(env.cluster.outage(2.0))  # the statement goes out to a server that is gone

    sa.event.listen(engine, "before_cursor_execute", crash_on_the_start)
    try:
        handle = env.executor.execute(agent, "go", session_id="outage-start-1")
    finally:
        sa.event.remove(engine, "before_cursor_execute", crash_on_the_start)
    assert len(outages) == 1, "the start's statement never went out"
    outages[0].join()
    assert handle.result(timeout_seconds=120).status == "completed"
    store = env.executor.store
    runs = store.list_runs("outage-start-1")
    assert [(r.turn, r.status, r.stream_start_sequence) for r in runs] == [(1, "completed", 0)]
    messages = store.get_messages("outage-start-1").messages
    assert [m.role for m in messages].count("user") == 1
    info = background_loop.run(env.manager.get_stream_info("outage-start-1"))
    assert info is not None and info.status == "ended" and info.chunk_count > 0
