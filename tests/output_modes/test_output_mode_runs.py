"""Each output mode end to end: PostgreSQL, DBOS, the real LiteLLM adapter, the scripted OpenAI server.

The assertions are on what reached the server (``response_format`` in native mode, the schema in
the system prompt in prompted mode, ``__finish__`` in tool mode) and on what the run recorded.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, define_agent, define_tool
from helix_dbos.messages import AssistantMessage, UserMessage
from helix_dbos.orchestration.output_modes import OUTPUT_CORRECTION_SOURCE
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


class Verdict(BaseModel):
    city: str
    score: int
    note: str | None = None


class CityIn(BaseModel):
    city: str


def _lookup(inp: CityIn, ctx: object) -> dict[str, Any]:
    return {"city": inp.city, "population": 2_100_000}


LOOKUP = define_tool("lookup", input_schema=CityIn, execute=_lookup, description="Look a city up.")


def _llm(base_url: str) -> dict[str, Any]:
    return {"model": "openai/fake", "api_base": base_url, "api_key": "test", "max_retries": 0}


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def _recorded_step_types(workflow_id: str) -> list[str]:
    return [
        s["output"]["step_result"]["type"]
        for s in DBOS.list_workflow_steps(workflow_id)
        if s["function_name"].endswith(".llm") and s["output"] and s["output"].get("step_result")
    ]


def test_tool_mode_sends_the_finish_tool_and_no_response_format(make_executor: ExecutorFactory) -> None:
    script = [{"tool_calls": [("__finish__", {"city": "Paris", "score": 7, "note": None})]}]
    with ScriptedOpenAIServer(script) as server:
        agent = define_agent("om-tool", system_prompt="Judge.", llm_config=_llm(server.base_url), output_schema=Verdict)
        handle = make_executor(LiteLLMAdapter(), [agent]).execute(agent, "Judge Paris")
        result = handle.result(timeout_seconds=60)
        requests = server.requests
    assert result.status == "completed", result.error
    assert result.output.model_dump() == {"city": "Paris", "score": 7, "note": None}
    assert "response_format" not in requests[0]
    assert _tool_names(requests[0]) == ["__finish__"]
    assert "Output Format" not in requests[0]["messages"][0]["content"]


def test_native_mode_sends_a_strict_response_format_and_tools_still_work(make_executor: ExecutorFactory) -> None:
    script = [
        {"tool_calls": [("lookup", {"city": "Paris"})]},
        {"text": '{"city": "Paris", "score": 9, "note": null}'},
    ]
    with ScriptedOpenAIServer(script) as server:
        agent = define_agent(
            "om-native",
            system_prompt="Judge.",
            llm_config=_llm(server.base_url),
            output_schema=Verdict,
            output_mode="native",
            tools=[LOOKUP],
        )
        handle = make_executor(LiteLLMAdapter(), [agent]).execute(agent, "Judge Paris")
        result = handle.result(timeout_seconds=60)
        requests = server.requests
    assert result.status == "completed", result.error
    # The strict schema forced "note" to be sent; its null is dropped and the default applies.
    assert result.output.model_dump() == {"city": "Paris", "score": 9, "note": None}
    assert len(requests) == 2
    for body in requests:
        assert _tool_names(body) == ["lookup"]  # no __finish__
        response_format = body["response_format"]
        assert response_format["type"] == "json_schema"
        spec = response_format["json_schema"]
        assert spec["name"] == "Verdict" and spec["strict"] is True
        assert spec["schema"]["additionalProperties"] is False
        assert sorted(spec["schema"]["required"]) == ["city", "note", "score"]
        assert set(spec["schema"]["properties"]) == {"city", "score", "note"}
    assert _recorded_step_types(handle.workflow_id) == ["tool_calls", "structured_output"]


def test_native_mode_corrects_an_invalid_answer(make_executor: ExecutorFactory) -> None:
    script = [{"text": '{"city": "Paris"}'}, {"text": '{"city": "Paris", "score": 4, "note": "ok"}'}]
    with ScriptedOpenAIServer(script) as server:
        agent = define_agent(
            "om-native-fix",
            system_prompt="Judge.",
            llm_config=_llm(server.base_url),
            output_schema=Verdict,
            output_mode="native",
        )
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "Judge Paris")
        result = handle.result(timeout_seconds=60)
        requests = server.requests
        state = executor.store.load_state(handle.session_id)
    assert result.status == "completed", result.error
    assert result.output.model_dump() == {"city": "Paris", "score": 4, "note": "ok"}
    assert len(requests) == 2
    retry = requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": '{"city": "Paris"}'}
    assert retry[-1]["role"] == "user" and "score" in retry[-1]["content"]
    assert state is not None
    corrections = [m for m in state.messages if isinstance(m, UserMessage) and m.metadata]
    assert [m.metadata["source"] for m in corrections if m.metadata] == [OUTPUT_CORRECTION_SOURCE]


def test_prompted_mode_puts_the_schema_in_the_prompt_and_repairs_json_in_a_string(
    make_executor: ExecutorFactory,
) -> None:
    answer = json.dumps(json.dumps({"city": "Lyon", "score": 6}))  # the model quoted its JSON
    script = [{"tool_calls": [("lookup", {"city": "Lyon"})]}, {"text": answer}]
    with ScriptedOpenAIServer(script) as server:
        agent = define_agent(
            "om-prompted",
            system_prompt="Judge.",
            llm_config=_llm(server.base_url),
            output_schema=Verdict,
            output_mode="prompted",
            tools=[LOOKUP],
        )
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "Judge Lyon")
        result = handle.result(timeout_seconds=60)
        requests = server.requests
        state = executor.store.load_state(handle.session_id)
    assert result.status == "completed", result.error
    assert result.output.model_dump() == {"city": "Lyon", "score": 6, "note": None}
    schema = json.dumps(Verdict.model_json_schema(), sort_keys=True)
    for body in requests:
        assert "response_format" not in body
        assert _tool_names(body) == ["lookup"]
        system = body["messages"][0]["content"]
        assert system.startswith("Judge.\n\n## Output Format\n") and schema in system
    assert state is not None
    assert isinstance(state.messages[-1], AssistantMessage) and state.messages[-1].content == answer


def test_prompted_mode_retries_an_invalid_answer_then_repairs_a_fenced_one(make_executor: ExecutorFactory) -> None:
    fenced = 'Here it is:\n```json\n{"city": "Nice", "score": 8,}\n```'
    script = [{"text": "I would say Nice is lovely."}, {"text": fenced}]
    with ScriptedOpenAIServer(script) as server:
        agent = define_agent(
            "om-prompted-fix",
            system_prompt="Judge.",
            llm_config=_llm(server.base_url),
            output_schema=Verdict,
            output_mode="prompted",
        )
        handle = make_executor(LiteLLMAdapter(), [agent]).execute(agent, "Judge Nice")
        result = handle.result(timeout_seconds=60)
        requests = server.requests
    assert result.status == "completed", result.error
    assert result.output.model_dump() == {"city": "Nice", "score": 8, "note": None}
    retry = requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "I would say Nice is lovely."}
    assert retry[-1]["role"] == "user" and "not valid JSON" in retry[-1]["content"]


def test_invalid_answers_are_bounded_by_max_steps(make_executor: ExecutorFactory) -> None:
    script = [{"text": "no idea"}, {"text": '{"city": 3}'}]
    with ScriptedOpenAIServer(script) as server:
        agent = define_agent(
            "om-prompted-fail",
            system_prompt="Judge.",
            llm_config=_llm(server.base_url),
            output_schema=Verdict,
            output_mode="prompted",
            max_steps=2,
        )
        handle = make_executor(LiteLLMAdapter(), [agent]).execute(agent, "Judge")
        result = handle.result(timeout_seconds=60)
        requests = server.requests
    assert len(requests) == 2
    assert result.status == "failed"
    assert result.error is not None and "without a valid output" in result.error
