"""Fixtures for the CLI tests: real sessions in a real PostgreSQL database, and the CLI as a process.

``cli_sessions`` runs real agent runs in this process (DBOS launched once per module, the durable
SQL stream, a scripted model reporting token usage) and leaves:

- ``cli-done``: a completed run of three LLM steps (two tool steps, a final answer) whose second tool
  result is longer than a preview;
- ``cli-waiting``: a run parked on an approval, so the session is ``active``.

``run_cli`` runs ``python -m helix_dbos.cli`` against that database in a narrow (60-column) terminal,
where a table that fits itself to the width would cut ids and statuses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, ToolContext, define_agent, define_tool
from helix_dbos.runtime.aio import background_loop
from helix_dbos.stream.sql import SqlStreamManager
from tests.runtime.conftest import make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]

REPO = Path(__file__).resolve().parents[2]
LONG_TEXT = "The long answer: " + " ".join(f"word{i}" for i in range(120)) + " THE-END"
USAGE = [(120, 7), (260, 9), (400, 11)]
"""(input, output) tokens the scripted model reports for each of ``cli-done``'s three LLM calls."""
MODEL = "openai/gpt-4o-mini"


class TextIn(BaseModel):
    text: str


def _lookup(inp: TextIn, ctx: ToolContext) -> dict[str, Any]:
    return {"text": LONG_TEXT if inp.text == "long" else inp.text}


lookup = define_tool("lookup", description="Look it up", input_schema=TextIn, execute=_lookup)
deploy = define_tool("deploy", description="Deploy", input_schema=TextIn, execute=_lookup, require_approval=True)
agent = define_agent("cli-agent", system_prompt="Look things up.", llm_config=MODEL, tools=[lookup, deploy])


def _calls(call_id: str, tool: str, text: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "type": "tool_calls",
        "tool_calls": [{"id": call_id, "name": tool, "arguments": {"text": text}}],
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


@pytest.fixture(scope="module")
def cli_database(runtime_db: str) -> str:
    """The module's database; sessions are added by ``cli_sessions`` (once per module)."""
    return runtime_db


@pytest.fixture(scope="module")
def cli_sessions(cli_database: str) -> Iterator[str]:
    from helix_dbos import DBOSAgentExecutor, SqlSessionStore

    model = MockLLMAdapter(
        [
            _calls("c1", "lookup", "short", USAGE[0]),
            _calls("c2", "lookup", "long", USAGE[1]),
            {
                "type": "text",
                "content": "All looked up.",
                "should_stop": True,
                "stop_reason": "end_turn",
                "usage": {"input_tokens": USAGE[2][0], "output_tokens": USAGE[2][1]},
            },
            _calls("d1", "deploy", "prod", (50, 5)),
        ]
    )
    streams = SqlStreamManager(cli_database)
    executor = DBOSAgentExecutor(
        SqlSessionStore(cli_database), llm_adapter=model, agents=[agent], stream_manager=streams, hot_window_seconds=0.2
    )
    try:
        assert executor.execute(agent, "Look up two things.", session_id="cli-done").result().status == "completed"
        waiting = executor.execute(agent, "Deploy it.", session_id="cli-waiting")
        assert waiting.result().status == "suspended_client_tool"
        yield cli_database
    finally:
        executor.close()
        executor.store.close()
        background_loop.run(streams.aclose())


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env.update({"PYTHONPATH": str(REPO), "COLUMNS": "60", **extra})
    return env


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m helix_dbos.cli ARGS`` as a process, in a 60-column terminal."""
    return subprocess.run(
        [sys.executable, "-m", "helix_dbos.cli", *args],
        cwd=cwd or REPO,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
