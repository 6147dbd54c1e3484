"""A new session's first run as one autocommitted statement on PostgreSQL, and its fallback.

The statement (``helix_dbos.store.postgres_start``) must write exactly the rows the transaction path
of ``start_run`` writes for the same request (the same columns, the same values, the same stream
sequence), write nothing at all when the session exists (a stream activation included), and keep a
run id taken by another session the typed ``RunIdConflictError``. SQLite keeps its transaction.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos.errors import RunIdConflictError
from helix_dbos.messages import AssistantMessage, UserMessage
from helix_dbos.runtime.aio import background_loop
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.base import StartRun
from helix_dbos.store.dialect import RidingStart
from helix_dbos.store.schema import messages, runs, sessions, streams
from helix_dbos.stream.sql import SqlStreamManager
from tests.round_trips import counting

_STREAM_CLOCK = ("created_at", "updated_at")
"""A stream row's times: set by the clock when the stream is activated, on either path."""


def _request(session_id: str = "new-1", run_id: str = "run-1", **update: Any) -> StartRun:
    request = StartRun(
        session_id=session_id,
        run_id=run_id,
        workflow_id=f"{session_id}-turn-1",
        agent_type="tester",
        new_session_state={"n": 0, "nested": {"b": 1, "a": [1, 2]}},
        input_messages=[
            UserMessage(content="hello \x00 \udc80 wörld"),  # NUL and a lone surrogate: the codec's escapes
            AssistantMessage(content="an earlier answer"),
            UserMessage(content="and now"),
        ],
        request_key="key-1",
        agent_fingerprint="fp-1",
        metadata={"source": "test", "z": 1, "a": 2},
        root_session_id="root-1",
        now_ms=1_700_000_000_123,
    )
    return request.model_copy(update=update)


def _rows(store: SqlSessionStore, session_id: str) -> dict[str, Any]:
    """Every row a start writes for ``session_id``, as stored (JSON as text, not parsed)."""
    with store.engine.connect() as conn:

        def read(table: sa.Table, where: sa.ColumnElement[bool], order: Any = None) -> list[dict[str, Any]]:
            columns = [sa.cast(c, sa.Text).label(c.name) if isinstance(c.type, sa.JSON) else c for c in table.c]
            query = sa.select(*columns).where(where)
            if order is not None:
                query = query.order_by(order)
            return [dict(row._mapping) for row in conn.execute(query)]

        stream = read(streams, streams.c.stream_id == session_id)
        return {
            "session": read(sessions, sessions.c.session_id == session_id),
            "messages": read(messages, messages.c.session_id == session_id, messages.c.sequence),
            "runs": read(runs, runs.c.session_id == session_id),
            "stream": [{k: v for k, v in row.items() if k not in _STREAM_CLOCK} for row in stream],
        }


def _delete(store: SqlSessionStore, session_id: str) -> None:
    with store.engine.begin() as conn:
        for table, column in ((sessions, sessions.c.session_id), (messages, messages.c.session_id)):
            conn.execute(table.delete().where(column == session_id))
        conn.execute(runs.delete().where(runs.c.session_id == session_id))
        conn.execute(streams.delete().where(streams.c.stream_id == session_id))


def _ended_stream(store: SqlSessionStore, stream_id: str, latest: int) -> None:
    """A stream that exists already, ended at ``latest``: its start must read that sequence and reactivate it."""
    with store.engine.begin() as conn:
        conn.execute(
            streams.insert().values(
                stream_id=stream_id,
                status="ended",
                latest_sequence=latest,
                chunk_count=latest,
                activation=2,
                end_sequence=latest,
                truncation_epoch=0,
                created_at=1,
                updated_at=1,
            )
        )


@pytest.fixture
def manager(pg_store: SqlSessionStore) -> Any:
    made = SqlStreamManager(pg_store.engine)
    yield made
    background_loop.run(made.aclose())


def _riding(manager: SqlStreamManager, store: SqlSessionStore, stream_id: str) -> tuple[Any, RidingStart]:
    joint = manager.start_for_transaction(stream_id, store.engine)
    assert joint is not None
    riding = joint.riding()
    assert riding is not None
    return joint, riding


@pytest.mark.postgres
@pytest.mark.parametrize("inherit", [False, True], ids=["own-tenant", "parent-tenant"])
def test_the_one_statement_writes_exactly_the_transactions_rows(
    pg_store: SqlSessionStore, manager: SqlStreamManager, inherit: bool
) -> None:
    if inherit:  # the tenant comes from the parent session, read inside the statement
        pg_store.create_session("parent-1", agent_type="tester", custom_state={}, now_ms=1, tenant="acme")
        request = _request(parent_session_id="parent-1")
    else:
        request = _request(tenant="globex")
    _ended_stream(pg_store, "new-1", latest=7)
    joint, riding = _riding(manager, pg_store, "new-1")
    with counting(pg_store.engine) as trips:
        fast = pg_store.start_new_session(request, riding)
    assert fast is not None and len(trips.on()) == 1
    fast_rows = _rows(pg_store, "new-1")

    _delete(pg_store, "new-1")
    _ended_stream(pg_store, "new-1", latest=7)
    slow = pg_store.start_run_with(request, joint.latest_sequence, joint.activate)  # no riding: the transaction
    slow_rows = _rows(pg_store, "new-1")

    assert fast_rows == slow_rows
    assert fast_rows["runs"][0]["stream_start_sequence"] == 7  # the ended stream's sequence, read in the statement
    assert fast_rows["stream"][0]["status"] == "active" and fast_rows["stream"][0]["activation"] == 3
    assert fast_rows["session"][0]["tenant"] == ("acme" if inherit else "globex")
    assert len(fast_rows["messages"]) == 3
    # What the caller gets back is the same too.
    assert fast.model_dump() == slow.model_dump()


@pytest.mark.postgres
def test_without_a_stream_the_start_is_one_statement_as_well(pg_store: SqlSessionStore) -> None:
    """``start_run`` (a child's start, no stream joined): the statement takes the request's sequence."""
    request = _request(stream_start_sequence=4)
    with counting(pg_store.engine) as trips:
        fast = pg_store.start_run(request)
    assert len(trips.on()) == 1 and trips.on()[0].startswith("WITH new_session AS")
    fast_rows = _rows(pg_store, "new-1")
    _delete(pg_store, "new-1")
    # The transaction path, as it was: callables and no riding statement keep ``start_run`` there.
    slow = pg_store.start_run_with(request, lambda conn: 4, lambda conn: None)
    assert fast.model_dump() == slow.model_dump()
    assert _rows(pg_store, "new-1") == fast_rows
    assert fast_rows["runs"][0]["stream_start_sequence"] == 4 and fast_rows["stream"] == []


@pytest.mark.postgres
def test_an_existing_session_fails_the_statement_and_it_writes_nothing(
    pg_store: SqlSessionStore, manager: SqlStreamManager
) -> None:
    pg_store.create_session("new-1", agent_type="tester", custom_state={}, now_ms=1)
    _ended_stream(pg_store, "new-1", latest=5)
    before = _rows(pg_store, "new-1")
    _, riding = _riding(manager, pg_store, "new-1")
    with counting(pg_store.engine) as trips:
        assert pg_store.start_new_session(_request(), riding) is None
    assert len(trips.on()) == 1  # the one statement, failed by its guard: no ROLLBACK to send
    assert _rows(pg_store, "new-1") == before  # no run, no message, and the stream still ended
    # start_run_with then takes the transaction path, unchanged: the session made by create_session
    # never ran, so its first run starts there.
    joint, riding = _riding(manager, pg_store, "new-1")
    started = pg_store.start_run_with(_request(), joint.latest_sequence, joint.activate, riding)
    assert not started.created_session and started.run.turn == 1 and started.run.stream_start_sequence == 5


@pytest.mark.postgres
def test_a_run_id_of_another_session_is_a_typed_refusal_and_writes_nothing(pg_store: SqlSessionStore) -> None:
    pg_store.start_run(_request(session_id="other", run_id="taken"))
    with pytest.raises(RunIdConflictError):
        pg_store.start_run(_request(run_id="taken"))
    assert not pg_store.session_exists("new-1")


def test_sqlite_keeps_its_transaction(sqlite_store: SqlSessionStore) -> None:
    assert sqlite_store.start_new_session(_request()) is None
    assert not sqlite_store.session_exists("new-1")
    started = sqlite_store.start_run(_request())
    assert started.created_session and started.run.stream_start_sequence == 0
