"""A real worker process for the MCP crash test: launch helix-dbos on PostgreSQL with an agent
whose tools come from the test MCP server over stdio, maybe start a run, and wait for its session
to finish (launching, starting and waiting are ``tests/worker_harness.py``'s).

Usage: python mcp_worker.py DATABASE_URL LLM_BASE_URL MCP_LOG MCP_RELEASE SESSION_ID [--start] [--not-retry-safe]

``--not-retry-safe``: the server's ``slow`` tool is declared not retry-safe (``retry_safe`` names
every other tool), with ``unknown_outcome="report"``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from helix_dbos import define_agent
from tests.mcp_tools.fixtures import stdio_server
from tests.worker_harness import serve_session

DATABASE_URL, LLM_BASE_URL, MCP_LOG, MCP_RELEASE, SESSION_ID = sys.argv[1:6]
safety: dict[str, Any] = {}
if "--not-retry-safe" in sys.argv:
    safety = {"retry_safe": {"add", "shout", "explode", "late"}, "unknown_outcome": "report"}

agent = define_agent(
    "mcp-crash-agent",
    system_prompt="Use your tools.",
    llm_config={"model": "openai/fake", "api_base": LLM_BASE_URL, "api_key": "test", "max_retries": 0},
    mcp_servers=[stdio_server(Path(MCP_LOG), release=Path(MCP_RELEASE), **safety)],
    max_steps=5,
)

serve_session(
    DATABASE_URL,
    [agent],
    SESSION_ID,
    executor_id="mcp-worker",
    start="go slow" if "--start" in sys.argv else None,
)
