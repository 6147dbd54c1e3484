"""A helix parent delegating to a helix agent over A2A (``A2ARemoteAgentTransport``), on a live service.

``boss`` calls ``subagent__digger``, whose transport sends the task to ``/a2a/digger`` over HTTP.
The delegation is the remote sub-agent's durable steps: the remote context is the remote session id
derived from the parent's session and tool call, and its message id derives from that, so a
parent recovered after a SIGKILL re-attaches to the task it started instead of sending it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from helix_dbos.client import HelixClient
from helix_dbos.remote_sub_agent import remote_session_id_for
from tests.a2a_protocol.agents import TOKEN
from tests.a2a_protocol.conftest import A2AService

EXPECTED_REMOTE = 'Done: {"found":"facts about dbos"}'
"""The A2A agent's answer (its tool result, as the transcript holds it)."""


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def check_delegation(a2a: A2AService, client: HelixClient, session_id: str, *, recovered: bool = False) -> None:
    remote_id = remote_session_id_for(session_id, "1.1-call-1")  # turn 1, step 1
    result = client.result(session_id, timeout_seconds=30)
    assert result.status == "completed", (result, a2a.serve.log_text())
    assert result.output == f"Done: {json.dumps(EXPECTED_REMOTE)}"  # the task's output, as the call's result
    remote = client.status(remote_id)  # the A2A context is the remote session, on the same service
    assert (remote.agent, remote.status, remote.output) == ("digger", "completed", EXPECTED_REMOTE)
    runs = a2a.serve.http.get(f"/v1/sessions/{remote_id}/runs").json()
    assert len(runs) == 1, runs  # one message, one task: never sent twice
    chunks = [e.data for e in client.stream(session_id) if e.event == "chunk"]
    types = [c["type"] for c in chunks]
    start, end = types.index("subagent_start"), types.index("subagent_end")
    proxied = [c for c in chunks[start + 1 : end] if c["type"] == "text_delta"]
    text = "".join(c["content"] for c in proxied)
    if recovered:  # a re-subscription does not replay what the task said before it: never twice, maybe not at all
        assert text in ("", EXPECTED_REMOTE), text
    else:
        assert text == EXPECTED_REMOTE  # the task's text, live in the parent's stream
    assert chunks[start]["sub_agent_id"] == remote_id


def test_a_helix_parent_calls_a_helix_a2a_agent(a2a: A2AService) -> None:
    with HelixClient(a2a.serve.base_url, token=TOKEN) as client:
        started = client.start("boss", "dig dbos")
        wait_for(a2a.dig_entries, "the A2A agent's tool to start")
        a2a.open_gate()
        check_delegation(a2a, client, started.session_id)


def test_a_parent_killed_mid_delegation_reattaches_to_its_task(a2a: A2AService) -> None:
    with HelixClient(a2a.serve.base_url, token=TOKEN) as client:
        started = client.start("boss", "dig dbos")
    wait_for(a2a.dig_entries, "the A2A agent's tool to start")
    a2a.serve.kill()  # both ends die: the parent inside its wait step, the task inside its tool
    a2a.serve.start()
    wait_for(lambda: len(a2a.dig_entries()) == 2, "the recovered task to run its tool again")
    a2a.open_gate()
    with HelixClient(a2a.serve.base_url, token=TOKEN) as client:
        check_delegation(a2a, client, started.session_id, recovered=True)


def test_an_a2a_agent_waiting_for_input_fails_the_call_at_once(a2a: A2AService) -> None:
    """``input-required`` has no answer across the boundary: the call fails, the task is canceled."""
    with HelixClient(a2a.serve.base_url, token=TOKEN) as client:
        started = client.start("boss", "publish dbos")
        result = client.result(started.session_id, timeout_seconds=30)
        assert result.status == "completed", result
        remote_id = remote_session_id_for(started.session_id, "1.1-call-1")
        refusal = f"Remote sub-agent 'approver' (session {remote_id!r}) waits for a client-executed tool"
        assert refusal in result.output, result.output  # the call's error, as the model saw it
        remote = client.status(remote_id)
        assert remote.aborted and remote.status == "failed"  # the parent canceled the waiting task
