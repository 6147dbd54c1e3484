"""A hot run's wake-up sent inside the submission's own transaction (``wake_in_submission``).

With the store in DBOS's system database (what ``launch()`` sets up on PostgreSQL), the answer and
the ``DBOS.recv`` wake-up commit together: one transaction instead of two, and never one without
the other. A wake-up the database refuses in that transaction must not cost the answer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from dbos import DBOSClient, DBOSConfig
from sqlalchemy import event

from helix_dbos import MockLLMAdapter, SqlSessionStore
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.launch import _store_is_dbos_database, dbos_config_for
from tests.runtime.conftest import ExecutorFactory
from tests.runtime.test_hitl import Out, calls, client_agent, finish_with_results, open_ids, wait_for

pytestmark = pytest.mark.postgres


class CommitsOfThisThread:
    """Counts the transactions committed by the calling thread, on every SQLAlchemy engine (the
    store's and DBOS's): DBOS's background threads commit all the time, so only ours count."""

    def __init__(self) -> None:
        self.count = 0
        self._thread = threading.get_ident()

    def _on_commit(self, conn: Any) -> None:
        if threading.get_ident() == self._thread:
            self.count += 1

    def __enter__(self) -> CommitsOfThisThread:
        event.listen(sa.engine.Engine, "commit", self._on_commit)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(sa.engine.Engine, "commit", self._on_commit)


@pytest.fixture
def waiting(make_executor: ExecutorFactory, request: pytest.FixtureRequest) -> Iterator[tuple[DBOSAgentExecutor, Any]]:
    """An executor that wakes in the submission, and a run of it waiting hot on one client call."""
    agent = client_agent(f"wake-in-txn-{request.node.name[-20:]}")
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]),
        [agent],
        wake_in_submission=True,
    )
    handle = executor.execute(agent, "where?")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    yield executor, handle


def answer(executor: DBOSAgentExecutor, handle: Any, result: str = "Lyon") -> Any:
    return executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": result}
    )


def test_a_hot_answer_and_its_wake_up_commit_in_one_transaction(waiting: tuple[DBOSAgentExecutor, Any]) -> None:
    executor, handle = waiting
    with CommitsOfThisThread() as commits:
        woken = answer(executor, handle)
    assert commits.count == 1  # the answer and the wake-up; DBOS.send after it would be a second
    assert woken is not None and woken.run_id == handle.run_id
    result = handle.result(timeout_seconds=10)
    assert result.status == "completed" and result.output == Out(answer='"Lyon"')
    assert len(executor.list_runs(handle.session_id)) == 1  # woken hot, not continued from a park


def test_a_submission_that_fails_after_its_wake_up_leaves_neither(
    waiting: tuple[DBOSAgentExecutor, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wake-up is rolled back with the answer: the run sees no message without an answer."""
    executor, handle = waiting
    real = DBOSClient.send_in_transaction

    def send_then_fail(self: DBOSClient, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        raise KeyboardInterrupt("the process is stopping")  # not a database error: nothing retries it

    monkeypatch.setattr(DBOSClient, "send_in_transaction", send_then_fail)
    with pytest.raises(KeyboardInterrupt):
        answer(executor, handle, "lost")
    monkeypatch.undo()
    assert open_ids(executor, handle.session_id) == ["c1"]  # no answer recorded
    with executor.store.engine.connect() as conn:
        queued = conn.execute(
            sa.text("SELECT count(*) FROM dbos.notifications WHERE destination_uuid = :wid"),
            {"wid": handle.workflow_id},
        ).scalar_one()
    assert queued == 0  # and no wake-up either
    answer(executor, handle, "kept")
    assert handle.result(timeout_seconds=10).output == Out(answer='"kept"')


def test_a_wake_up_the_database_refuses_does_not_cost_the_answer(
    waiting: tuple[DBOSAgentExecutor, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused, the wake-up rolls the submission back whole; the answer is then recorded on its own
    and the wake-up goes out with DBOS.send: the run is woken hot, with the answer, exactly once.
    A refusal means DBOS's tables are not where the executor was told: it stops trying."""
    executor, handle = waiting
    refusals: list[str] = []

    def refuse(self: DBOSClient, conn: sa.Connection, destination_id: str, *args: Any, **kwargs: Any) -> None:
        refusals.append(destination_id)
        conn.execute(sa.text("SELECT 1/0"))

    monkeypatch.setattr(DBOSClient, "send_in_transaction", refuse)
    with CommitsOfThisThread() as commits:
        woken = answer(executor, handle)
    assert refusals == [handle.workflow_id]  # tried once, in the transaction
    assert commits.count == 2  # then the answer alone, and DBOS.send
    assert woken is not None and woken.run_id == handle.run_id
    result = handle.result(timeout_seconds=10)
    assert result.status == "completed" and result.output == Out(answer='"Lyon"')
    assert len(executor.list_runs(handle.session_id)) == 1
    assert executor.client.control.waker is None  # no second refused transaction for the next answer


def test_a_connection_lost_while_writing_the_wake_up_retries_the_submission_whole(
    waiting: tuple[DBOSAgentExecutor, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transient error is not a refusal: the store's retry runs answer and wake-up again, together."""
    executor, handle = waiting
    real = DBOSClient.send_in_transaction
    attempts: list[int] = []

    def drop_the_first(self: DBOSClient, conn: sa.Connection, *args: Any, **kwargs: Any) -> None:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            conn.execute(sa.text("SELECT pg_terminate_backend(pg_backend_pid())"))
        real(self, conn, *args, **kwargs)

    monkeypatch.setattr(DBOSClient, "send_in_transaction", drop_the_first)
    with CommitsOfThisThread() as commits:
        woken = answer(executor, handle)
    assert attempts == [0, 1] and commits.count == 1  # the second attempt committed both
    assert executor.client.control.waker is not None
    assert woken is not None and woken.run_id == handle.run_id
    assert handle.result(timeout_seconds=10).output == Out(answer='"Lyon"')


def test_waking_in_the_submission_needs_a_postgresql_store(sqlite_store: SqlSessionStore) -> None:
    with pytest.raises(ValueError, match="wake_in_submission needs a PostgreSQL store"):
        DBOSAgentExecutor(sqlite_store, llm_adapter=MockLLMAdapter([]), wake_in_submission=True)


def test_launch_wakes_in_the_submission_only_where_dbos_shares_the_store_database() -> None:
    url = "postgresql://u@db:5432/app"
    same: DBOSConfig = dbos_config_for(url)
    assert _store_is_dbos_database(url, same)
    moved: list[dict[str, Any]] = [
        {"system_database_url": "postgresql://u@db:5432/elsewhere"},
        {"dbos_system_schema": "other"},
        {"serializer": object()},
        {"system_database_engine": object()},
        {"sharding": True},
    ]
    for override in moved:
        assert not _store_is_dbos_database(url, {**same, **override}), override  # type: ignore[typeddict-item]
    sqlite = "sqlite:///tmp/helix.sqlite"
    assert not _store_is_dbos_database(sqlite, dbos_config_for(sqlite))
