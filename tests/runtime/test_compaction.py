"""Compaction of long sessions, end to end: real DBOS on PostgreSQL, the real LiteLLM adapter, and a
scripted OpenAI-compatible server whose context window is a request-body byte budget
(``ScriptedOpenAIServer(max_request_bytes=...)``): it refuses larger requests as providers do.

The server asserts the budget on its side: a request over it lands in ``server.over_window``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import LiteLLMAdapter, SqlSessionStore, define_agent, define_tool
from helix_dbos.compaction import SUMMARY_HEADER, CompactionPolicy
from helix_dbos.compaction.policy import DEFAULT_SUMMARY_INSTRUCTIONS
from helix_dbos.llm.litellm import import_litellm
from helix_dbos.messages import AssistantMessage, UserMessage
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres

WINDOW_BYTES = 9_000
"""The scripted provider's context window (request-body bytes)."""

FILLER = "lorem ipsum dolor sit amet " * 4
"""Makes each turn weigh something (about 110 bytes, 30 tokens)."""


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    import_litellm()


def is_summary_request(body: dict[str, Any]) -> bool:
    return bool(body["messages"]) and body["messages"][0]["content"] == DEFAULT_SUMMARY_INSTRUCTIONS


class Chat:
    """The scripted model: answers each turn by its number; summaries are numbered as they are made."""

    def __init__(self) -> None:
        self.summaries = 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if is_summary_request(body):
            self.summaries += 1
            return {"text": f"summary {self.summaries}: the user counted turns", "usage": usage(400, 12)}
        last = body["messages"][-1]["content"]
        return {"text": f"noted {last.split()[1]} {FILLER}", "usage": usage(100, 30)}


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(handler=Chat(), max_request_bytes=WINDOW_BYTES) as srv:
        yield srv


def chat_agent(server: ScriptedOpenAIServer, name: str, policy: CompactionPolicy | None) -> Any:
    return define_agent(
        name,
        system_prompt="You keep count.",
        llm_config={"model": "openai/fake", "api_base": server.base_url, "api_key": "test", "max_retries": 0},
        compaction=policy,
    )


def run_turns(make_executor: ExecutorFactory, agent: Any, turns: int, session: str) -> list[Any]:
    """Run ``turns`` turns of one session; returns (run id, result) pairs."""
    executor = make_executor(LiteLLMAdapter(), [agent])
    results: list[Any] = []
    for turn in range(1, turns + 1):
        handle = executor.execute(agent, f"turn {turn} {FILLER}", session_id=session)
        results.append((handle.run_id, handle.result()))
        if results[-1][1].status != "completed":
            break  # a failed session takes no more turns
    return results


SUMMARISING = CompactionPolicy(max_input_tokens=1_200, keep_last_messages=12, summarize=True)


def check_long_session(
    make_executor: ExecutorFactory, runtime_db: str, server: ScriptedOpenAIServer, turns: int, name: str
) -> None:
    results = run_turns(make_executor, chat_agent(server, name, SUMMARISING), turns, f"{name}-s")
    assert [r.status for _, r in results] == ["completed"] * turns
    assert server.over_window == []  # the server refused no request: all were within its window
    chats = [b for b in server.requests if not is_summary_request(b)]
    summaries = [b for b in server.requests if is_summary_request(b)]
    assert len(chats) == turns
    assert all(len(json.dumps(b)) < WINDOW_BYTES for b in server.requests)
    # Sticky: a compaction every few turns, not on every call; each later call shows the latest summary.
    assert 0 < len(summaries) < turns / 4
    assert chats[-1]["messages"][0]["content"] == "You keep count."
    assert chats[-1]["messages"][1]["content"].startswith(SUMMARY_HEADER + f"summary {len(summaries)}:")
    state = SqlSessionStore(runtime_db).load_state(f"{name}-s")
    assert state is not None
    users = [m.content.split()[1] for m in state.messages if isinstance(m, UserMessage)]
    assert users == [str(t) for t in range(1, turns + 1)]  # the transcript holds every turn
    assert sum(isinstance(m, AssistantMessage) for m in state.messages) == turns


def test_a_40_turn_session_stays_within_the_window(
    make_executor: ExecutorFactory, runtime_db: str, server: ScriptedOpenAIServer
) -> None:
    check_long_session(make_executor, runtime_db, server, 40, "compact40")


@pytest.mark.slow
def test_a_300_turn_session_stays_within_the_window(
    make_executor: ExecutorFactory, runtime_db: str, server: ScriptedOpenAIServer
) -> None:
    check_long_session(make_executor, runtime_db, server, 300, "compact300")


def test_without_a_policy_the_provider_refuses_the_long_session(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    """The baseline the policy fixes: the same session without one outgrows the window and fails."""
    results = run_turns(make_executor, chat_agent(server, "nocompact", None), 40, "nocompact-s")
    assert len(results) < 40 and results[-1][1].status == "failed"
    assert "context window" in (results[-1][1].error or "")
    assert server.over_window


def test_the_summary_is_a_recorded_step_with_usage(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    results = run_turns(make_executor, chat_agent(server, "summed", SUMMARISING), 24, "summed-s")
    steps_by_run = {run_id: [s["function_name"] for s in DBOS.list_workflow_steps(run_id)] for run_id, _ in results}
    compacting = [run_id for run_id, names in steps_by_run.items() if "summed.compaction.compact" in names]
    assert compacting
    first = steps_by_run[compacting[0]]
    # before the model call it shapes: check, then compact, then the llm step
    assert first.index("summed.compaction.check") < first.index("summed.compaction.compact") < first.index("summed.llm")
    run_usage = dict(results)[compacting[0]].usage
    assert run_usage is not None
    assert run_usage.llm_calls == 2  # the turn's call and the summary's
    assert run_usage.input_tokens == 100 + 400 and run_usage.output_tokens == 30 + 12
    # every run of an agent with a policy checks; one without a policy records no compaction step
    assert all("summed.compaction.check" in names for names in steps_by_run.values())


def test_an_agent_without_a_policy_records_no_compaction_step(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    results = run_turns(make_executor, chat_agent(server, "plain", None), 2, "plain-s")
    for run_id, _ in results:
        names = [s["function_name"] for s in DBOS.list_workflow_steps(run_id)]
        assert not [n for n in names if "compaction" in n or "patch" in n.lower()], names


class LineIn(BaseModel):
    text: str


def test_a_refused_call_is_compacted_and_retried_once(make_executor: ExecutorFactory) -> None:
    """One run with many tool turns; the token threshold is never reached, the provider's window is.

    The refused call is compacted (window only: no summary) and made again; calls and results stay paired.
    """

    def model(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        done = int(json.loads(last["content"])["noted"].split()[0]) + 1 if last["role"] == "tool" else 0
        if done < 30:
            return {"tool_calls": [{"name": "note", "arguments": {"text": f"{done} {FILLER}"}}]}
        return {"text": "all noted"}

    note = define_tool("note", input_schema=LineIn, execute=lambda inp, ctx: {"noted": inp.text})
    with ScriptedOpenAIServer(handler=model, max_request_bytes=WINDOW_BYTES) as server:
        agent = define_agent(
            "toolturns",
            system_prompt="Note thirty lines.",
            llm_config={"model": "openai/fake", "api_base": server.base_url, "api_key": "test", "max_retries": 0},
            tools=[note],
            max_steps=40,
            compaction=CompactionPolicy(max_input_tokens=1_000_000, keep_last_messages=10),
        )
        executor = make_executor(LiteLLMAdapter(), [agent])
        handle = executor.execute(agent, "go", session_id="toolturns-s")
        result = handle.result()
        assert result.status == "completed", result.error
        refused = server.over_window
        accepted = server.requests
    assert 1 <= len(refused) <= 3  # each refusal is answered by a compaction, and the retry passes
    names = [s["function_name"] for s in DBOS.list_workflow_steps(handle.run_id)]
    assert names.count("toolturns.compaction.compact") == len(refused)
    for body in accepted:  # what the model saw never starts its window with an orphaned tool result
        roles = [m["role"] for m in body["messages"]]
        assert roles[0] == "system" and roles[1] != "tool"
    state = executor.store.load_state("toolturns-s")
    assert state is not None and find_unpaired_tool_call_ids(state.messages) == []
    assert sum(1 for m in state.messages if m.role == "tool") == 30  # the transcript keeps every result
