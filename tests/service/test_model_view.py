"""What the model saw at a step, beside the transcript: ``GET /v1/sessions/{id}/model-view`` and
:func:`helix_dbos.compaction.model_view`, checked against the requests the scripted
OpenAI-compatible server really received (real DBOS on PostgreSQL, the real LiteLLM adapter)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from helix_dbos import LiteLLMAdapter, define_agent
from helix_dbos.compaction import SUMMARY_HEADER, CompactionPolicy, model_view
from helix_dbos.errors import CheckpointNotFoundError, SessionNotFoundError
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.service import create_app
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory
from tests.service.conftest import AUTH, TOKEN
from tests.service.test_routes import assert_error

pytestmark = pytest.mark.postgres

TURNS = 8


def is_summary_request(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith("You compress")


def scripted(body: dict[str, Any]) -> dict[str, Any]:
    if is_summary_request(body):
        return {"text": "The user has been counting sheep."}
    return {"text": "Noted."}


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    import_litellm()
    with ScriptedOpenAIServer(handler=scripted) as srv:
        yield srv


def shepherd(server: ScriptedOpenAIServer) -> Any:
    return define_agent(
        "mv-shepherd",
        system_prompt="You keep count.",
        llm_config={"model": "openai/gpt-4o-mini", "api_base": server.base_url, "api_key": "test"},
        compaction=CompactionPolicy(max_input_tokens=120, keep_last_messages=4, summarize=True),
    )


def pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages]


async def test_the_model_view_is_what_the_model_was_sent(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    agent = shepherd(server)
    executor = make_executor(LiteLLMAdapter(), [agent])
    run_ids = []
    for n in range(1, TURNS + 1):
        handle = executor.execute(agent, f"Sheep number {n} jumped the fence.", session_id="mv-flock")
        assert handle.result().status == "completed"
        run_ids.append(handle.run_id)
    sent = [b for b in server.requests if not is_summary_request(b)]
    assert len(sent) == TURNS
    app = create_app(executor, bearer_tokens=[TOKEN])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service", headers=AUTH) as http:
        views = []
        for run_id in run_ids:
            response = await http.get("/v1/sessions/mv-flock/model-view", params={"run_id": run_id, "step": 1})
            assert response.status_code == 200, response.text
            views.append(response.json())
        # Each view is the request the model got, after its system prompt, message for message.
        for view, body in zip(views, sent, strict=True):
            assert pairs([m["message"] for m in view["messages"]]) == pairs(body["messages"][1:])
        assert not views[0]["compacted"] and views[0]["transcript_marks"] == ["seen"]
        last = views[-1]
        assert last["compacted"] and last["compaction"]["summary"] == "The user has been counting sheep."
        assert last["messages"][0]["kind"] == "summary" and last["messages"][0]["transcript_index"] is None
        assert last["messages"][0]["message"]["content"].startswith(SUMMARY_HEADER)
        marks = last["transcript_marks"]
        assert len(marks) == last["transcript_length"] == 2 * TURNS - 1
        assert "dropped" in marks and marks[-1] == "seen"
        shown = [m["transcript_index"] for m in last["messages"][1:]]
        assert shown == [i for i, mark in enumerate(marks) if mark == "seen"]
        # The same read from Python (off the event loop, as DBOS's synchronous reads want).
        from_python = await asyncio.to_thread(model_view, executor.reads, "mv-flock", run_ids[-1], 1)
        assert from_python.model_dump(mode="json") == last
        # Typed 404s: no session, a step without a model call, a step or a run the session never had.
        assert_error(
            await http.get("/v1/sessions/nobody/model-view", params={"run_id": run_ids[0], "step": 1}),
            404,
            "state_session_not_found",
        )
        for run_id, step in ((run_ids[0], 0), (run_ids[0], 2), ("no-such-run", 1)):
            response = await http.get("/v1/sessions/mv-flock/model-view", params={"run_id": run_id, "step": step})
            assert_error(response, 404, "state_checkpoint_not_found")
        assert_error(await http.get("/v1/sessions/mv-flock/model-view", params={"step": 1}), 422, "validation_error")
    with pytest.raises(SessionNotFoundError):
        await asyncio.to_thread(model_view, executor.reads, "nobody", run_ids[0], 1)
    with pytest.raises(CheckpointNotFoundError):
        await asyncio.to_thread(model_view, executor.reads, "mv-flock", run_ids[0], 0)
