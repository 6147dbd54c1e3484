"""``sessions show`` reports the same usage as ``GET /v1/sessions/{id}`` (issue 14: one rollup everywhere).

The CLI used to add its own totals from the per-step rows: a failed-but-billed attempt's tokens were
mixed into the input and output totals (the API keeps them apart, under ``failed``), and the
sub-agents' sessions were left out (the API counts them). Real LiteLLM against the scripted server,
on PostgreSQL; the CLI as a process; the API in-process (ASGI transport).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, SqlStreamManager, define_agent, define_tool
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.runtime.aio import background_loop
from helix_dbos.service import create_app
from helix_dbos.testing import ScriptedOpenAIServer
from tests.cli.conftest import run_cli
from tests.runtime.conftest import ExecutorFactory
from tests.runtime.sub_agent_agents import Model, agents
from tests.service.conftest import AUTH, TOKEN

pytestmark = pytest.mark.postgres


class CityIn(BaseModel):
    city: str


weather = define_tool("get_weather", input_schema=CityIn, execute=lambda inp, ctx: {"city": inp.city, "sky": "sun"})


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    import_litellm()  # seconds on first use: not inside a run's deadline


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


async def _api_usage(executor: Any, session_id: str) -> dict[str, Any]:
    app = create_app(executor, bearer_tokens=[TOKEN])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=AUTH) as c:
        response = await c.get(f"/v1/sessions/{session_id}")
    assert response.status_code == 200, response.text
    got: dict[str, Any] = response.json()["usage"]
    return got


def _shown(session_id: str, url: str) -> tuple[dict[str, Any], str]:
    as_json = run_cli("sessions", "show", session_id, "--json", "--database-url", url)
    text = run_cli("sessions", "show", session_id, "--database-url", url)
    assert as_json.returncode == 0 and text.returncode == 0, as_json.stderr + text.stderr
    shown: dict[str, Any] = json.loads(as_json.stdout)
    return shown, text.stdout


def test_a_failed_billed_attempt_is_apart_in_the_cli_as_in_the_api(
    server: ScriptedOpenAIServer, make_executor: ExecutorFactory, runtime_db: str
) -> None:
    server.add(
        {"tool_calls": [("get_weather", {})], "raw_arguments": '{"city": "Par', "usage": usage(500, 7)},  # billed
        {"tool_calls": [("get_weather", {"city": "Paris"})], "usage": usage(510, 8)},
        {"text": "Sunny.", "usage": usage(600, 2)},
    )
    config = {"model": "openai/gpt-4o-mini", "api_base": server.base_url, "api_key": "test", "max_retries": 1}
    agent = define_agent("cli-billed", system_prompt="Be brief.", llm_config=config, tools=[weather])
    executor = make_executor(LiteLLMAdapter(sleep=_no_sleep), [agent])
    handle = executor.execute(agent, "Paris?")
    assert handle.result(timeout_seconds=60).status == "completed"

    api = asyncio.run(_api_usage(executor, handle.session_id))
    assert (api["input_tokens"], api["failed"]["input_tokens"]) == (1110, 500)
    shown, text = _shown(handle.session_id, runtime_db)
    assert shown["usage"] == api  # the very rollup of the API
    assert (shown["totals"]["input_tokens"], shown["totals"]["output_tokens"]) == (1110, 10)
    assert shown["totals"]["cost_usd"] == pytest.approx(api["cost_usd"])
    (run,) = shown["runs"]
    assert run["usage"] == api  # one run: the run's rollup is the session's
    step1 = next(s for s in run["steps"] if s["step"] == 1)
    assert (step1["input_tokens"], step1["failed_llm_calls"], step1["failed_input_tokens"]) == (510, 1, 500)
    assert "1 failed attempt(s) billed apart: 500 input / 7 output tokens" in text, text


def test_the_cli_session_usage_counts_the_sub_agents_as_the_api_does(
    make_executor: ExecutorFactory, runtime_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELIX_SUBAGENT_EFFECTS", str(tmp_path / "effects.txt"))
    manager = SqlStreamManager(runtime_db)
    try:
        with ScriptedOpenAIServer(handler=Model()) as srv:
            planner, _ = agents(srv.base_url)
            executor = make_executor(LiteLLMAdapter(), [planner], stream_manager=manager)
            handle = executor.execute("planner", "plan the weather report")
            assert handle.result(timeout_seconds=30).status == "completed"
            sent = srv.usage_sent
        api = asyncio.run(_api_usage(executor, handle.session_id))
        assert api["llm_calls"] == len(sent) == 2 + 2 * 2  # the parent's two calls and each child's two
        assert api["input_tokens"] == sum(u["prompt_tokens"] for u in sent)
        shown, text = _shown(handle.session_id, runtime_db)
        assert shown["usage"] == api
        assert shown["runs"][0]["usage"] == api  # one run: its cost is the session's, delegations included
        assert f"{api['llm_calls']} LLM call(s), {api['input_tokens']} input" in text, text
    finally:
        background_loop.run(manager.aclose())
