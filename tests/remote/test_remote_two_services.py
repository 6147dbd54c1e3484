"""A parent on service A delegates to an agent on service B, both real ``helix-dbos serve`` processes.

The remote run is held inside its tool (``dig`` waits for a gate file) while a process is SIGKILLed
and started again; then the gate opens. Whatever was killed, the parent completes with the remote
result once, B holds one session with one run for the delegation, and the remote chunks reached
the parent's stream once each, between ``subagent_start`` and ``subagent_end``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from helix_dbos.client import HelixClient, ServerEvent
from helix_dbos.remote_sub_agent import remote_session_id_for
from tests.remote.agents import TOKEN
from tests.remote.conftest import Pair

pytestmark = pytest.mark.postgres

EXPECTED = 'Boss: "Found: facts about dbos"'


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def query(url: str, sql: str, session_id: str) -> list[Any]:
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), {"sid": session_id}).all())
    finally:
        engine.dispose()


def start_delegation(pair: Pair, a: HelixClient) -> tuple[str, str]:
    started = a.start("boss", "research dbos")
    remote_id = remote_session_id_for(started.session_id, "1.1-delegate-1")  # turn 1, step 1
    wait_for(pair.dig_entries, "the remote tool to start")
    return started.session_id, remote_id


def check_outcome(pair: Pair, a: HelixClient, session_id: str, remote_id: str) -> list[ServerEvent]:
    result = a.result(session_id, timeout_seconds=30)
    assert (result.status, result.output) == ("completed", EXPECTED), (result, pair.a.log_text(), pair.b.log_text())
    with HelixClient(pair.b.base_url, token=TOKEN) as b:
        remote = b.status(remote_id)
        assert (remote.status, remote.output) == ("completed", "Found: facts about dbos")
        runs = pair.b.http.get(f"/v1/sessions/{remote_id}/runs").json()
    assert len(runs) == 1, runs  # the remote agent ran once: one session, one run
    sessions = "SELECT session_id FROM helix_sessions WHERE session_id LIKE :sid || '%'"
    assert [r.session_id for r in query(pair.b.url, sessions, session_id)] == [remote_id]
    refs = query(
        pair.a.url,
        "SELECT sub_session_id, status, remote FROM helix_sub_session_refs WHERE session_id = :sid",
        session_id,
    )
    assert [(r.sub_session_id, r.status) for r in refs] == [(remote_id, "completed")]
    assert refs[0].remote["agent"] == "researcher" and refs[0].remote["url"] == pair.b.base_url
    assert refs[0].remote["last_sequence"] > 0
    events = list(a.stream(session_id))
    chunks = [e.data for e in events if e.event == "chunk"]
    types = [c["type"] for c in chunks]
    start, end = types.index("subagent_start"), types.index("subagent_end")
    proxied = [c for c in chunks[start + 1 : end] if c.get("agent_type") == "researcher"]
    assert any(c["type"] == "tool_start" and c["tool_name"] == "dig" for c in proxied), types
    assert [c["type"] for c in proxied].count("tool_start") == 1  # proxied once, whatever was replayed
    assert chunks[end]["sub_agent_id"] == remote_id and chunks[start]["sub_agent_id"] == remote_id
    assert events[-1].event == "end"
    return events


def test_a_parent_delegates_to_an_agent_on_another_service(pair: Pair) -> None:
    with HelixClient(pair.a.base_url, token=TOKEN) as a:
        session_id, remote_id = start_delegation(pair, a)
        pair.open_gate()
        check_outcome(pair, a, session_id, remote_id)
    assert len(pair.dig_entries()) == 1


def test_the_remote_service_is_killed_mid_run(pair: Pair) -> None:
    with HelixClient(pair.a.base_url, token=TOKEN) as a:
        session_id, remote_id = start_delegation(pair, a)
        pair.b.kill()
        pair.b.start()  # B's DBOS recovers the remote run: its tool runs again, held by the gate
        wait_for(lambda: len(pair.dig_entries()) == 2, "the recovered remote tool")
        pair.open_gate()
        check_outcome(pair, a, session_id, remote_id)


def test_the_parent_service_is_killed_mid_delegation(pair: Pair) -> None:
    with HelixClient(pair.a.base_url, token=TOKEN) as a:
        session_id, remote_id = start_delegation(pair, a)
        wait_for(
            lambda: pair.a.http.get(f"/v1/sessions/{session_id}").json()["stream"]["latest_sequence"] > 3, "proxying"
        )
        pair.a.kill()
        pair.a.start()  # A's DBOS recovers the parent: it re-attaches to the remote run, never starts another
        pair.open_gate()
        check_outcome(pair, a, session_id, remote_id)
    assert len(pair.dig_entries()) == 1


def test_a_client_tool_inside_the_remote_agent_fails_fast(pair: Pair) -> None:
    with HelixClient(pair.a.base_url, token=TOKEN) as a:
        started = a.start("boss", "ask the browser")
        began = time.monotonic()
        result = a.result(started.session_id, timeout_seconds=30)
        assert time.monotonic() - began < 10
        assert result.status == "completed"
        assert "client-executed tool" in str(result.output), result
        remote_id = remote_session_id_for(started.session_id, "1.1-delegate-1")  # turn 1, step 1
        remote = HelixClient(pair.b.base_url, token=TOKEN).status(remote_id)
        assert remote.status == "failed" and remote.aborted  # the remote run was stopped, not left waiting


def test_an_abort_of_the_parent_aborts_the_remote_run(pair: Pair) -> None:
    with HelixClient(pair.a.base_url, token=TOKEN) as a, HelixClient(pair.b.base_url, token=TOKEN) as b:
        session_id, remote_id = start_delegation(pair, a)
        a.abort(session_id, "user left")
        remote = wait_for(lambda: (s := b.status(remote_id)).status == "failed" and s, "the remote abort", timeout=10)
        assert remote.aborted and "user left" in (remote.error or "")
        refs = "SELECT status FROM helix_sub_session_refs WHERE session_id = :sid"
        wait_for(lambda: [r.status for r in query(pair.a.url, refs, session_id)] == ["failed"], "the ref to close")


def test_an_interrupt_of_the_parent_interrupts_the_remote_run(pair: Pair) -> None:
    with HelixClient(pair.a.base_url, token=TOKEN) as a, HelixClient(pair.b.base_url, token=TOKEN) as b:
        session_id, remote_id = start_delegation(pair, a)
        assert a.interrupt(session_id, "pause please") is True
        wait_for(lambda: _interrupt_requested(pair, remote_id), "the remote interrupt")
        pair.open_gate()  # the remote tool finishes; the remote run then stops, interrupted
        assert a.result(session_id, timeout_seconds=20).status == "interrupted"
        assert b.status(remote_id).status == "interrupted"


def _interrupt_requested(pair: Pair, remote_id: str) -> bool:
    return bool(pair.b.http.get(f"/v1/sessions/{remote_id}").json()["interrupt_requested"])
