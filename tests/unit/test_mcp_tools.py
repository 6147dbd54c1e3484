"""MCP server configs and the pure mapping from a recorded listing to the run's tools.

Names: ``{server}__{tool}`` by default, a configurable prefix, what providers refuse replaced by
``_``, and clashes refused with :class:`MCPToolNameError`. Approval gates per server or per tool.
No server is started here (the runs are in ``tests/mcp_tools``).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from helix_dbos import DefinitionError, define_agent, define_tool
from helix_dbos.errors import MCPServerError, MCPToolNameError
from helix_dbos.mcp import MCPServerStdio, MCPServerStreamableHTTP
from helix_dbos.mcp.tools import ListedTool, MCPCallResult, build_server_tools, exposed_name, refuse_clashes


async def _never(server: Any, name: str, arguments: dict[str, Any]) -> MCPCallResult:
    raise AssertionError("no call in these tests")


def _server(**options: Any) -> MCPServerStdio:
    return MCPServerStdio(name=options.pop("name", "files"), command="files-server", **options)


def _listed(*names: str) -> list[ListedTool]:
    return [ListedTool(name=n, description=f"{n} it", input_schema={"type": "object"}) for n in names]


def test_tools_are_named_server_then_tool_and_keep_the_listed_schema() -> None:
    (tool,) = build_server_tools(_server(), _listed("read"), _never)
    assert tool.name == "files__read" and tool.description == "read it"
    assert tool.json_schema() == {"type": "object", "properties": {}}
    assert tool.require_approval is False and callable(tool.execute)


def test_the_prefix_is_configurable_and_can_be_empty() -> None:
    assert exposed_name(_server(tool_prefix="fs_"), "read") == "fs_read"
    assert exposed_name(_server(tool_prefix=""), "read") == "read"


def test_characters_providers_refuse_become_underscores() -> None:
    assert exposed_name(_server(), "repo.search/v2") == "files__repo_search_v2"


def test_two_tools_that_become_one_name_are_refused() -> None:
    with pytest.raises(MCPToolNameError, match=r"'a\.b' and 'a/b' both become 'files__a_b'"):
        build_server_tools(_server(), _listed("a.b", "a/b"), _never)


def test_a_name_too_long_or_reserved_is_refused_naming_the_server() -> None:
    with pytest.raises(
        MCPToolNameError, match=r"MCP server 'files': its tool 'x+\+' cannot be exposed as 'files__x+_'"
    ):
        build_server_tools(_server(), _listed("x" * 70 + "+"), _never)
    with pytest.raises(MCPToolNameError) as refused:
        build_server_tools(_server(tool_prefix=""), _listed("__finish__"), _never)
    assert refused.value.code == "validation_error"


def test_a_name_another_tool_of_the_agent_has_is_refused() -> None:
    tools = build_server_tools(_server(), _listed("read"), _never)
    with pytest.raises(MCPToolNameError, match="'files__read' is already taken"):
        refuse_clashes(["files__read"], tools, _server())
    refuse_clashes(["other"], tools, _server())


def test_approval_gates_a_whole_server_or_the_tools_it_names() -> None:
    every = build_server_tools(_server(require_approval=True), _listed("read", "write"), _never)
    assert [t.require_approval for t in every] == [True, True]
    named = build_server_tools(_server(require_approval=["write"]), _listed("read", "write"), _never)
    assert [t.require_approval for t in named] == [False, True]
    limited = build_server_tools(
        _server(require_approval=["write"], approval_timeout_ms=5000), _listed("read", "write"), _never
    )
    assert [t.timeout_ms for t in limited] == [None, 5000]  # how long the gated call waits for its decision


def test_retry_safety_covers_a_whole_server_or_names_the_tools_that_may_run_again() -> None:
    default = build_server_tools(_server(), _listed("read", "pay"), _never)
    assert [(t.retry_safe, t.unknown_outcome) for t in default] == [(True, "ask"), (True, "ask")]
    none = build_server_tools(_server(retry_safe=False, unknown_outcome="report"), _listed("read", "pay"), _never)
    assert [(t.retry_safe, t.unknown_outcome) for t in none] == [(False, "report"), (False, "report")]
    # A set names the tools that may run again: one the server adds later counts as not retry-safe.
    named = build_server_tools(_server(retry_safe=["read"]), _listed("read", "pay", "added_later"), _never)
    assert [t.retry_safe for t in named] == [True, False, False]
    assert [t.unknown_outcome for t in named] == ["ask", "ask", "ask"]


def test_configs_that_reach_the_same_server_share_a_connection_key() -> None:
    base = _server()
    renamed = _server(name="other", tool_prefix="", require_approval=True, retry_safe=False, keep_alive_seconds=1)
    assert renamed.connection_key() == base.connection_key()  # naming and gates are not the connection
    assert _server(args=["--root", "/tmp"]).connection_key() != base.connection_key()
    assert _server(env={"TOKEN": "a"}).connection_key() != _server(env={"TOKEN": "b"}).connection_key()
    web = MCPServerStreamableHTTP(name="files", url="http://127.0.0.1:1/mcp")
    assert web.connection_key() != base.connection_key()
    assert web.connection_key() != web.model_copy(update={"headers": {"Authorization": "x"}}).connection_key()


def test_the_model_sees_the_structured_result_else_the_text_else_the_blocks() -> None:
    text = {"type": "text", "text": "hello"}
    image = {"type": "image", "data": "AA==", "mimeType": "image/png"}
    assert MCPCallResult(content=[text], structured={"result": 1}).for_model() == {"result": 1}
    assert MCPCallResult(content=[text, text]).for_model() == "hello\nhello"
    assert MCPCallResult(content=[text, image]).for_model() == [text, image]


@pytest.mark.parametrize(
    "options",
    [
        {"name": "has space"},
        {"name": ""},
        {"tool_prefix": "a.b"},
        {"timeout_seconds": 0},
        {"surprise": 1},
        {"keep_alive_seconds": -1},
        {"unknown_outcome": "retry"},
    ],
)
def test_a_bad_server_config_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _server(**options)


def test_define_agent_refuses_a_server_listed_twice_or_not_a_server() -> None:
    twice = [_server(), MCPServerStreamableHTTP(name="files", url="http://127.0.0.1:1/mcp")]
    with pytest.raises(DefinitionError, match="MCP server 'files' is listed twice"):
        define_agent("a", system_prompt="x", llm_config="openai/x", mcp_servers=twice)
    with pytest.raises(DefinitionError, match="mcp_servers must be MCPServerStdio or MCPServerStreamableHTTP"):
        define_agent("a", system_prompt="x", llm_config="openai/x", mcp_servers=["files-server"])  # type: ignore[list-item]


def test_an_agent_keeps_its_servers_and_its_fingerprint_tells_them_apart() -> None:
    from helix_dbos.runtime.registry import agent_fingerprint

    plain = define_agent("a", system_prompt="x", llm_config="openai/x", tools=[define_tool("t", execute=print)])
    served = define_agent(
        "a", system_prompt="x", llm_config="openai/x", tools=[define_tool("t", execute=print)], mcp_servers=[_server()]
    )
    assert served.mcp_servers == (_server(),)
    assert agent_fingerprint(plain) != agent_fingerprint(served)


def test_a_server_error_is_a_tool_error_or_a_timeout_by_code() -> None:
    assert MCPServerError("files", "down").code == "tool_execution_failed"
    assert MCPServerError("files", "slow", timed_out=True).code == "tool_timeout"
    assert MCPServerError("files", "down").message == "MCP server 'files': down"
