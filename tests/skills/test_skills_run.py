"""An agent that loads a skill and reads one of its files, on PostgreSQL through the real LiteLLM
adapter against the scripted OpenAI-compatible server (issue 15, "Proof").

The scripted model answers by how many tool results it has seen: ``load_skill`` ->
``read_skill_file`` (a line range) -> ``read_skill_file`` with a traversal path -> a text answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, define_agent, file_system_skill_provider
from helix_dbos.messages import ToolResultMessage
from helix_dbos.runtime import step_names
from helix_dbos.runtime.aio import background_loop
from helix_dbos.stream.chunks import CustomEventChunk, StreamChunk
from helix_dbos.sub_agent import create_sub_agent_tool
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory
from tests.skills.fixtures import make_skills_root

pytestmark = pytest.mark.postgres


def _llm(base_url: str) -> dict[str, Any]:
    return {"model": "openai/fake", "api_base": base_url, "api_key": "test", "max_retries": 0}


def reader_model(body: dict[str, Any]) -> dict[str, Any]:
    seen = sum(1 for m in body["messages"] if m["role"] == "tool")
    if seen == 0:
        return {"tool_calls": [{"id": "l1", "name": "load_skill", "arguments": {"name": "deploy-runbook"}}]}
    if seen == 1:
        args = {"name": "deploy-runbook", "path": "references/checklist.md", "startLine": 2, "endLine": 3}
        return {"tool_calls": [{"id": "r1", "name": "read_skill_file", "arguments": args}]}
    if seen == 2:
        args = {"name": "deploy-runbook", "path": "../../secret.txt"}
        return {"tool_calls": [{"id": "r2", "name": "read_skill_file", "arguments": args}]}
    return {"text": "Deployed by the checklist."}


@pytest.fixture
def skills_root(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "secret.txt").write_text("TOP-SECRET")
    yield make_skills_root(tmp_path / "skills")


async def _collect(stream: Any) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def test_an_agent_loads_a_skill_and_reads_one_of_its_files(make_executor: ExecutorFactory, skills_root: Path) -> None:
    with ScriptedOpenAIServer(handler=reader_model) as server:
        agent = define_agent(
            "skilled",
            system_prompt="You deploy things.",
            llm_config=_llm(server.base_url),
            skills=file_system_skill_provider([skills_root]),
            preload_skills=["pdf-processing", "missing-skill"],
        )
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "deploy the service")
        result = handle.result(timeout_seconds=60)
        assert result.status == "completed", result.error
        assert result.output == "Deployed by the checklist."
        requests = server.requests

    # Every LLM call carried the same system prompt: the catalog (and the preloaded body) at its end.
    systems = [r["messages"][0] for r in requests]
    assert len(systems) == 4 and all(s == systems[0] for s in systems)
    system = systems[0]["content"]
    assert system.startswith("You deploy things.\n\n## Skills\n")
    assert '<skill name="deploy-runbook">' in system and '<skill name="pdf-processing" loaded="true">' in system
    assert "### Active Skills" in system and "Use pdftotext." in system and "missing-skill" not in system
    tool_names = [t["function"]["name"] for t in requests[0]["tools"]]
    assert tool_names == ["load_skill", "read_skill_file"]

    state = executor.get_state(handle.session_id)
    assert state is not None
    results = {m.tool_call_id: m for m in state.messages if isinstance(m, ToolResultMessage)}
    assert json.loads(results["l1"].content).startswith("# Skill: deploy-runbook\n\n# Deploy runbook")
    assert "- references/checklist.md" in json.loads(results["l1"].content)
    assert json.loads(results["r1"].content) == "check 2\ncheck 3\n"
    refused = results["r2"]
    assert (refused.metadata or {}).get("is_error") and "'..' is refused" in refused.content
    assert all("TOP-SECRET" not in json.dumps(r) for r in requests)

    # The skill_loaded event reached the stream; the catalog was resolved once, in its own step, first.
    chunks = background_loop.run(_collect(background_loop.run(handle.stream())))
    events = [(c.event_name, c.data) for c in chunks if isinstance(c, CustomEventChunk)]
    assert events == [("skill_loaded", {"name": "deploy-runbook"})]
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.workflow_id)]
    assert steps[0] == step_names.skills_catalog("skilled")
    assert steps.count(step_names.skills_catalog("skilled")) == 1


class Answer(BaseModel):
    answer: str


class Question(BaseModel):
    question: str


def delegating_model(body: dict[str, Any]) -> dict[str, Any]:
    system = body["messages"][0]["content"]
    tool_results = [m for m in body["messages"] if m["role"] == "tool"]
    if system.startswith("You are the child."):
        return {"tool_calls": [{"id": "f1", "name": "__finish__", "arguments": {"answer": "42"}}]}
    if not tool_results:
        return {"tool_calls": [{"id": "s1", "name": "subagent__helper-child", "arguments": {"question": "q"}}]}
    return {"text": "done"}


def test_a_sub_agent_does_not_inherit_its_parents_skills(make_executor: ExecutorFactory, skills_root: Path) -> None:
    with ScriptedOpenAIServer(handler=delegating_model) as server:
        child = define_agent(
            "helper-child", system_prompt="You are the child.", llm_config=_llm(server.base_url), output_schema=Answer
        )
        parent = define_agent(
            "skilled-parent",
            system_prompt="You are the parent.",
            llm_config=_llm(server.base_url),
            skills=file_system_skill_provider([skills_root]),
            preload_skills=["deploy-runbook"],
            tools=[create_sub_agent_tool(child, Question)],
        )
        executor = make_executor(LiteLLMAdapter(), [parent])
        result = executor.execute(parent, "ask the child").result(timeout_seconds=60)
        assert result.status == "completed", result.error
        requests = server.requests
    child_requests = [r for r in requests if r["messages"][0]["content"].startswith("You are the child.")]
    parent_requests = [r for r in requests if r["messages"][0]["content"].startswith("You are the parent.")]
    assert len(child_requests) == 1 and len(parent_requests) == 2
    assert all("## Skills" in r["messages"][0]["content"] for r in parent_requests)
    assert "## Skills" not in child_requests[0]["messages"][0]["content"]
    assert "Deploy runbook" not in json.dumps(child_requests[0])
    assert {t["function"]["name"] for t in child_requests[0]["tools"]} == {"__finish__"}
