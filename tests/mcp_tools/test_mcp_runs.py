"""Runs whose agent takes MCP servers as tool sources, end to end.

Real parts throughout: a real MCP server process written with the ``mcp`` SDK's server API
(``mcp_test_server.py``, over stdio and over streamable HTTP with uvicorn), a real DBOS run on
PostgreSQL, the real LiteLLM adapter against the scripted OpenAI-compatible server. The MCP server
logs every listing and call to a file, which the tests count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from helix_dbos import LLMConfig, define_agent, define_tool
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.mcp import MCPServer, MCPServerStreamableHTTP
from helix_dbos.messages import ToolResultMessage
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer
from tests.mcp_tools.fixtures import calls_of, free_port, http_server, server_pids, stdio_server
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


def mcp_agent(name: str, model: ScriptedOpenAIServer, servers: list[MCPServer], **options: Any) -> Any:
    config = LLMConfig(model="openai/fake", api_base=model.base_url, api_key="test", max_retries=0)
    return define_agent(name, system_prompt="Use your tools.", llm_config=config, mcp_servers=servers, **options)


def tool_results(executor: Any, session_id: str) -> list[ToolResultMessage]:
    state = executor.store.load_state(session_id)
    return [m for m in state.messages if isinstance(m, ToolResultMessage)]


def is_error(message: ToolResultMessage) -> bool:
    return bool((message.metadata or {}).get("is_error"))


def steps_of(workflow_id: str) -> list[str]:
    return [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]


def test_a_run_lists_and_calls_a_stdio_servers_tools(make_executor: ExecutorFactory, tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    script = [
        {"tool_calls": [{"id": "a1", "name": "calc__add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "2 + 3 = 5"},
    ]
    with ScriptedOpenAIServer(script) as model:
        agent = mcp_agent("mcp-stdio", model, [stdio_server(log)])
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "add 2 and 3")
        result = handle.result()
        requests = model.requests

    assert result.status == "completed" and result.output == "2 + 3 = 5"
    offered = {t["function"]["name"]: t["function"] for t in requests[0]["tools"]}
    assert set(offered) == {"calc__add", "calc__shout", "calc__explode", "calc__slow"}
    assert offered["calc__add"]["description"] == "Add two integers."
    assert offered["calc__add"]["parameters"]["required"] == ["a", "b"]
    (answer,) = tool_results(executor, handle.session_id)
    assert answer.tool_call_id == "a1" and json.loads(answer.content) == {"result": 5}
    assert len(calls_of(log, "list")) == 1 and len(server_pids(log)) == 1  # listed and called on one session
    assert [c["arguments"] for c in calls_of(log, "call")] == [{"a": 2, "b": 3}]
    assert steps_of(handle.workflow_id) == [
        "DBOS.patch-helix-mcp-tool-listing",
        "mcp-stdio.mcp.list.calc",
        "mcp-stdio.llm",
        "mcp-stdio.tool.calc__add",
        "mcp-stdio.llm",
        "mcp-stdio.finalize",
    ]


def test_a_tool_error_and_a_dead_http_server_are_tool_errors_the_model_sees(
    make_executor: ExecutorFactory, tmp_path: Path
) -> None:
    log = tmp_path / "mcp.log"
    with http_server(log) as mcp_server:

        def model_turn(body: dict[str, Any]) -> dict[str, Any]:
            seen = [m for m in body["messages"] if m["role"] == "tool"]
            if not seen:
                return {"tool_calls": [{"id": "e1", "name": "web__explode", "arguments": {"reason": "on purpose"}}]}
            if len(seen) == 1:
                mcp_server.kill()  # the server dies between two calls of the run
                return {"tool_calls": [{"id": "s1", "name": "web__shout", "arguments": {"text": "hi"}}]}
            return {"text": "done despite the errors"}

        with ScriptedOpenAIServer(handler=model_turn) as model:
            agent = mcp_agent("mcp-http", model, [mcp_server.config(timeout_seconds=10)])
            executor = make_executor(LiteLLMAdapter(), [agent])
            handle = executor.execute(agent, "try")
            result = handle.result()

    assert result.status == "completed" and result.output == "done despite the errors"
    exploded, unreachable = tool_results(executor, handle.session_id)
    assert is_error(exploded) and "MCP server 'web': tool 'explode' reported an error" in exploded.content
    assert "exploded: on purpose" in exploded.content
    assert is_error(unreachable) and "MCP server 'web': calling 'shout' failed" in unreachable.content
    assert [c["tool"] for c in calls_of(log, "call")] == ["explode"]  # shout never reached a server
    assert len(calls_of(log, "list")) >= 1


def test_a_server_tool_named_like_one_of_the_agents_tools_fails_the_run_saying_so(
    make_executor: ExecutorFactory, tmp_path: Path
) -> None:
    log = tmp_path / "mcp.log"
    own = define_tool("calc__add", description="the agent's own", execute=lambda args, ctx: "own")
    with ScriptedOpenAIServer([{"text": "never asked"}]) as model:
        agent = mcp_agent("mcp-clash", model, [stdio_server(log)], tools=[own])
        executor = make_executor(LiteLLMAdapter(), [agent])
        result = executor.execute(agent, "add").result()
        assert model.request_count == 0
    assert result.status == "failed"
    assert result.error is not None and "MCP server 'calc': tool name 'calc__add' is already taken" in result.error


def test_a_server_that_cannot_be_listed_leaves_the_run_without_its_tools(
    make_executor: ExecutorFactory, caplog: pytest.LogCaptureFixture
) -> None:
    down = MCPServerStreamableHTTP(name="down", url=f"http://127.0.0.1:{free_port()}/mcp", timeout_seconds=5)
    with ScriptedOpenAIServer([{"text": "fine without it"}]) as model:
        agent = mcp_agent("mcp-down", model, [down])
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "hi")
        result = handle.result()
        (request,) = model.requests
    assert result.status == "completed" and result.output == "fine without it"
    assert "tools" not in request or not request["tools"]
    (listing,) = [
        s for s in DBOS.list_workflow_steps(handle.workflow_id) if s["function_name"] == "mcp-down.mcp.list.down"
    ]
    assert listing["output"]["tools"] == []
    assert listing["output"]["error"].startswith("MCP server 'down': listing its tools failed")
