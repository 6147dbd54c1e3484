"""Usage is counted once across a SIGKILL: a real worker dies mid-run, another finishes it.

Uses the crash harness of ``test_crash_recovery`` (a worker process on PostgreSQL calling the
scripted server through the real LiteLLM adapter). The server lives in this process, so
``usage_sent`` is every usage the provider would have billed, across both workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.testing import ScriptedOpenAIServer
from helix_dbos.usage import summarize_usage
from tests.pg import unique_name
from tests.runtime.test_crash_recovery import BASELINE_LLM_CALLS, Model, _crash_and_recover, _effects

pytestmark = pytest.mark.postgres


@pytest.fixture
def crash_env(new_migrated_database: Callable[[str], str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    url = new_migrated_database("crash")
    yield {"url": url, "effects": tmp_path / "effects.txt", "session": f"crash-{unique_name('s')}"}


def _check_counted_once(env: dict[str, Any], server: ScriptedOpenAIServer) -> None:
    store = SqlSessionStore(env["url"])
    try:
        rows = store.get_usage(env["session"])
    finally:
        store.close()
    llm = [r for r in rows if r.kind == "llm"]
    tools = [r for r in rows if r.kind == "tool"]
    assert [(r.step, r.success) for r in llm] == [(1, True), (2, True), (3, True)]  # one row per step
    assert sorted(r.name for r in tools) == ["append_line", "slow_append", "submit"]
    sent = server.usage_sent
    assert len(sent) == BASELINE_LLM_CALLS  # answered requests; a call cut by the kill was never billed
    summary = summarize_usage(rows)
    assert summary.input_tokens == sum(u["prompt_tokens"] for u in sent)
    assert summary.output_tokens == sum(u["completion_tokens"] for u in sent)
    assert (summary.llm_calls, summary.tool_calls, summary.failed.llm_calls) == (3, 3, 0)


def test_usage_is_counted_once_when_the_worker_dies_during_a_tool(crash_env: dict[str, Any]) -> None:
    """Recovery replays the recorded LLM steps and re-runs the tool: no usage row twice."""
    server = _crash_and_recover(crash_env, Model(), lambda s: _effects(crash_env)["start:two"] >= 1)
    assert server.request_count == BASELINE_LLM_CALLS
    _check_counted_once(crash_env, server)


def test_usage_is_counted_once_when_the_worker_dies_in_a_committed_llm_step(crash_env: dict[str, Any]) -> None:
    """The LLM step had committed the previous iteration (usage included) when the worker died in
    its model call: the re-executed step commits again, and the commit's key makes it a no-op."""
    model = Model(hold_at_tool_results=1)
    server = _crash_and_recover(crash_env, model, lambda s: model.held.is_set())
    assert server.request_count == BASELINE_LLM_CALLS + 1  # the cut call was sent again
    _check_counted_once(crash_env, server)
