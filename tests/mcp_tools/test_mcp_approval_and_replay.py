"""MCP tools behind approval gates, and MCP runs under replay.

An approval-gated MCP tool waits for the user's decision like any gated tool (the human-in-the-loop
machinery); the server sees the call only once it is approved. A replayed run (a fork past its last
step, which re-runs workflow code only) takes its tool set from the recorded listing and asks no
server; a run recorded before its agent had MCP servers (the ``helix-mcp-tool-listing`` patch)
replays without listing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.mcp.capability import MCPCapability
from helix_dbos.orchestration.message_builder import NOT_APPROVED_MESSAGE
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer
from tests.mcp_tools.fixtures import calls_of, server_log, stdio_server
from tests.mcp_tools.test_mcp_runs import mcp_agent, steps_of, tool_results
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres

ADD_THEN_ANSWER = [
    {"tool_calls": [{"id": "g1", "name": "calc__add", "arguments": {"a": 40, "b": 2}}]},
    {"text": "answered"},
]


def _pending_call(executor: Any, session_id: str) -> Any:
    # Generous: the first run of a test process imports LiteLLM and starts the server while the
    # crash tests' workers load the same 2 cores (seen at 29-31 s under ``-n 2``); it returns early.
    deadline = time.monotonic() + 90
    while True:
        pending = executor.list_pending_tool_calls(session_id)
        if pending:
            return pending[0]
        assert time.monotonic() < deadline, "the gated call was never registered"
        time.sleep(0.05)


@pytest.mark.parametrize("approved", [True, False], ids=["approve", "deny"])
def test_an_approval_gated_mcp_tool_runs_only_when_approved(
    make_executor: ExecutorFactory, tmp_path: Path, approved: bool
) -> None:
    log = tmp_path / "mcp.log"
    with ScriptedOpenAIServer(ADD_THEN_ANSWER) as model:
        # Gated by the server's own tool name; shout stays ungated.
        agent = mcp_agent(f"mcp-gate-{approved}", model, [stdio_server(log, require_approval={"add"})])
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "add")
        pending = _pending_call(executor, handle.session_id)
        assert (pending.tool_call_id, pending.tool_name, pending.kind) == ("g1", "calc__add", "approval")
        assert calls_of(log, "call") == []  # nothing reaches the server before the decision
        answer: dict[str, Any] = {"kind": "approval-response", "tool_call_id": "g1", "approved": approved}
        if approved:
            answer["arguments_digest"] = pending.arguments_digest
        else:
            answer["reason"] = "not today"
        executor.submit_tool_result(handle.session_id, answer)
        result = handle.result()

    assert result.status == "completed" and result.output == "answered"
    (message,) = tool_results(executor, handle.session_id)
    if approved:
        assert message.content == '{"result":42}'
        assert [c["arguments"] for c in calls_of(log, "call")] == [{"a": 40, "b": 2}]
    else:
        assert NOT_APPROVED_MESSAGE in message.content
        assert calls_of(log, "call") == []


def test_a_replayed_run_takes_its_tools_from_the_recorded_listing(
    make_executor: ExecutorFactory, tmp_path: Path
) -> None:
    log = tmp_path / "mcp.log"
    with ScriptedOpenAIServer(ADD_THEN_ANSWER) as model:
        agent = mcp_agent("mcp-replay", model, [stdio_server(log)])
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "add")
        assert handle.result().status == "completed"
        seen = server_log(log)
        steps = DBOS.list_workflow_steps(handle.workflow_id)
        replayed: dict[str, Any] = DBOS.fork_workflow(
            handle.workflow_id, max(s["function_id"] for s in steps) + 1
        ).get_result()
    assert replayed["status"] == "completed" and replayed["output"] == "answered"
    assert server_log(log) == seen  # neither listed nor called again


def test_a_run_recorded_before_its_agent_had_mcp_servers_replays_without_listing(
    make_executor: ExecutorFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "mcp.log"
    with ScriptedOpenAIServer([{"text": "no tools needed"}]) as model:
        agent = mcp_agent("mcp-legacy", model, [stdio_server(log)])
        executor = make_executor(LiteLLMAdapter(), [agent])
        with monkeypatch.context() as legacy:  # the code before MCP servers: no listing, no patch
            legacy.setattr(MCPCapability, "run_tools", lambda self, run: [])
            handle = executor.execute(agent, "hi")
            assert handle.result().status == "completed"
        assert steps_of(handle.workflow_id) == ["mcp-legacy.llm", "mcp-legacy.finalize"]
        steps = DBOS.list_workflow_steps(handle.workflow_id)
        replayed: dict[str, Any] = DBOS.fork_workflow(
            handle.workflow_id, max(s["function_id"] for s in steps) + 1
        ).get_result()
    assert replayed["status"] == "completed" and replayed["output"] == "no tools needed"
    assert server_log(log) == []  # the patch found the model call at its position: no listing
