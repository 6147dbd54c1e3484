"""A commit whose acknowledgement is lost is retried and recognised as done, not as a conflict.

The hardest case for retrying writes: the server committed, then the connection dropped before the
client heard so. The retry must see its own earlier work and report it, never write twice and never
report a conflict. Real parts: a TCP proxy between the store and PostgreSQL forwards everything
until it is armed, then swallows the server's ``CommandComplete("COMMIT")`` (or, for a step commit
that is one autocommitted statement, that statement's ``CommandComplete``) and drops the
connection, exactly what a network failure at that instant does.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from helix_dbos.messages import AssistantMessage, ToolCallRequest, ToolResultMessage, UserMessage
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.base import StartRun, StartRunResult, StepCommit
from helix_dbos.store.migrate import upgrade
from helix_dbos.store.schema import checkpoints, messages
from tests import pg

pytestmark = pytest.mark.postgres

# The backend's CommandComplete message for COMMIT: type 'C', length 11, "COMMIT\0"; and for a
# statement that returned one row, "SELECT 1\0": a step commit is one autocommitted statement, whose
# own completion is its commit's acknowledgement.
COMMIT_COMPLETE = b"C\x00\x00\x00\x0bCOMMIT\x00"
ONE_ROW_COMPLETE = b"C\x00\x00\x00\x0dSELECT 1\x00"


class AckDroppingProxy:
    """Forwards TCP to PostgreSQL; when armed, drops the connection instead of passing a commit's ack on."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self.armed = threading.Event()
        self.dropped = 0
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._target))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        try:
            while data := source.recv(65536):
                if from_server and self.armed.is_set() and (COMMIT_COMPLETE in data or ONE_ROW_COMPLETE in data):
                    self.armed.clear()
                    self.dropped += 1
                    break  # the server has committed; the client never hears it
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._closing = True
        self._server.close()


@pytest.fixture
def proxied_store(pg_server_url: str) -> Iterator[tuple[SqlSessionStore, AckDroppingProxy]]:
    url = pg.create_database(pg_server_url, pg.unique_name("ack"))
    upgrade(url)
    parsed = make_url(url)
    assert parsed.port is not None
    proxy = AckDroppingProxy(parsed.port)
    store = SqlSessionStore(parsed.set(port=proxy.port).render_as_string(hide_password=False))
    yield store, proxy
    store.close()
    proxy.close()


def _start(store: SqlSessionStore) -> StartRunResult:
    return store.start_run(
        StartRun(
            session_id="s1",
            run_id="r1",
            workflow_id="wf-r1",
            agent_type="tester",
            new_session_state={},
            input_messages=[UserMessage(content="hi")],
            request_key="req-1",
            now_ms=1,
        )
    )


def test_a_step_commit_whose_ack_was_lost_is_reported_as_already_applied(
    proxied_store: tuple[SqlSessionStore, AckDroppingProxy],
) -> None:
    store, proxy = proxied_store
    _start(store)
    step = [
        AssistantMessage(tool_calls=[ToolCallRequest(id="c1", name="t", arguments={})]),
        ToolResultMessage(tool_call_id="c1", tool_name="t", content="ok"),
    ]
    commit = StepCommit(
        session_id="s1", run_id="r1", step_count=1, first_sequence=1, messages=step, custom_state={"n": 1}, now_ms=2
    )
    proxy.armed.set()
    result = store.commit_step(commit)
    assert proxy.dropped == 1, "the proxy should have swallowed the commit's acknowledgement"
    assert not result.applied  # the retry found the first attempt's commit
    with store.engine.connect() as conn:
        stored = conn.execute(sa.select(checkpoints.c.checkpoint_id).where(checkpoints.c.step_count == 1)).all()
        count = conn.execute(sa.select(sa.func.count()).select_from(messages)).scalar_one()
    assert [row.checkpoint_id for row in stored] == [result.checkpoint_id]
    assert count == 3
    state = store.load_state("s1")
    assert state is not None and state.custom_state == {"n": 1} and state.messages[1:] == step
    # The run goes on from there as if nothing happened.
    nxt = StepCommit(
        session_id="s1",
        run_id="r1",
        step_count=2,
        first_sequence=3,
        messages=[AssistantMessage(content="done")],
        custom_state={"n": 2},
        session_status="completed",
        run_status="completed",
        now_ms=3,
    )
    assert store.commit_step(nxt).applied


def test_a_run_start_whose_ack_was_lost_returns_the_started_run(
    proxied_store: tuple[SqlSessionStore, AckDroppingProxy],
) -> None:
    store, proxy = proxied_store
    proxy.armed.set()
    started = _start(store)
    assert proxy.dropped == 1
    assert started.existing and started.run.run_id == "r1"  # the executor then starts its workflow if missing
    assert store.get_message_count("s1") == 1
    assert [run.run_id for run in store.list_runs("s1")] == ["r1"]
