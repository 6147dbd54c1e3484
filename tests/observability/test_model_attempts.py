"""A run whose model chain retried and failed over, on PostgreSQL through the real LiteLLM adapter:
every attempt is a usage row (failed ones apart) and an event on the step's ``chat`` span, and the
step's recorded output names the model that answered."""

from __future__ import annotations

from typing import Any

import pytest
from dbos import DBOS
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helix_dbos import LiteLLMAdapter, define_agent
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.llm.retry import RetryPolicy
from helix_dbos.step_result import StepResultAdapter
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    import_litellm()


def by_model(scripts: dict[str, list[dict[str, Any]]]) -> Any:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        script = scripts.get(body["model"]) or [{"status": 599, "error_message": "unscripted"}]
        return script.pop(0)

    return answer


def test_every_attempt_is_in_usage_and_on_the_trace(
    make_executor: ExecutorFactory, spans: InMemorySpanExporter
) -> None:
    scripts = {
        "primary": [{"status": 500}, {"status": 429, "headers": {"Retry-After": "0.05"}}],
        "backup": [{"status": 400, "error_message": "bad"}],
        "third": [{"text": "done", "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}}],
    }
    with ScriptedOpenAIServer(handler=by_model(scripts)) as server:
        agent = define_agent(
            "fallback-usage",
            system_prompt="Be brief.",
            llm_config={
                "model": "openai/primary",
                "fallbacks": ["openai/backup", "openai/third"],
                "api_base": server.base_url,
                "api_key": "test",
                "retry": RetryPolicy(max_attempts=2, initial_backoff_seconds=0.05, max_backoff_seconds=0.05),
            },
        )
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "Hi")
        result = handle.result(timeout_seconds=60)
        assert result.status == "completed", result
        assert [b["model"] for b in server.requests] == ["primary", "primary", "backup", "third"]

    rows = [r for r in executor.store.get_usage(handle.session_id) if r.kind == "llm"]
    assert [(r.name, r.success, r.input_tokens) for r in rows] == [
        ("openai/primary", False, 0),
        ("openai/primary", False, 0),
        ("openai/backup", False, 0),
        ("openai/third", True, 11),
    ]
    summary = handle.usage()
    assert (summary.llm_calls, summary.input_tokens, summary.output_tokens) == (1, 11, 2)
    assert summary.failed.llm_calls == 3

    # the step's recorded output names the model that answered: a replay reads it from here
    steps = DBOS.list_workflow_steps(handle.run_id)
    llm = next(s for s in steps if s["function_name"].endswith(".llm"))
    recorded = StepResultAdapter.validate_python(llm["output"]["step_result"])
    assert recorded.answered_by == "openai/third"
    assert [a.outcome for a in recorded.model_attempts] == ["retried", "fell_back", "fell_back", "answered"]

    chat = next(s for s in spans.get_finished_spans() if s.name == "chat openai/primary")
    assert (chat.attributes or {})["gen_ai.response.model"] == "openai/third"
    events = [dict(e.attributes or {}) for e in chat.events if e.name == "helix.llm.attempt"]
    assert [(e["gen_ai.request.model"], e["helix.attempt.outcome"]) for e in events] == [
        ("openai/primary", "retried"),
        ("openai/primary", "fell_back"),
        ("openai/backup", "fell_back"),
        ("openai/third", "answered"),
    ]
    assert events[1]["error.type"] == "provider_rate_limited"
    assert events[0]["helix.attempt.wait_seconds"] > 0
