"""Past the retry bound: a clear, safe error, and a run that failed with it is recovered by ``retry()``.

The bound is ``HELIX_DB_RETRY_SECONDS`` (default 120 s); here it is 1 s and the database stays
down for 4 s. A store call then gives up with ``DatabaseUnavailableError`` (``transport_error``,
retryable, no host or SQL in its message). In a run, the crash is placed by a hook at a point where
a step still has a store call to make (between recording a human-in-the-loop call and reading it
back), so the run fails with that error; once the database is back, ``retry()`` completes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from helix_dbos import AgentHooks, LLMGenerateInput, StepResult, ToolResultMessage, define_agent, define_tool
from helix_dbos.errors import DatabaseUnavailableError
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult
from helix_dbos.store.retry import RetryPolicy
from tests import pg
from tests.durability.harness import Env, launched

pytestmark = pytest.mark.postgres

BOUND = RetryPolicy(max_seconds=1.0, initial_backoff=0.05, max_backoff=0.3)


class QuestionIn(BaseModel):
    question: str


class AskModel:
    """Asks the client once, then answers with what it was told."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        answers = [m.content for m in input.messages if isinstance(m, ToolResultMessage)]
        if not answers:
            call = ParsedToolCall(id="q1", name="ask", arguments={"question": "ready?"})
            return ToolCallsStepResult(tool_calls=[call], stop_reason="tool_use")
        return TextStepResult(content=f"told {answers[0]}", should_stop=True, stop_reason="end_turn")


class CrashOnce:
    """A hook that crashes the database the first time it fires (a timing device, not a fake)."""

    def __init__(self) -> None:
        self.cluster: pg.LocalCluster | None = None
        self.restart: threading.Thread | None = None

    def __call__(self, payload: object) -> None:
        if self.restart is None and self.cluster is not None:
            self.restart = self.cluster.outage(4.0)


crash = CrashOnce()
ask_agent = define_agent(
    "bound-agent",
    system_prompt="Ask, then answer.",
    llm_config="scripted/bound",
    tools=[define_tool("ask", input_schema=QuestionIn, execute="client")],
    hooks=AgentHooks(on_agent_suspended=crash),
)


@pytest.fixture(scope="module")
def env(crash_cluster: pg.LocalCluster) -> Iterator[Env]:
    with launched(crash_cluster, retry=BOUND, agents=[ask_agent], llm_adapter=AskModel()) as env:
        yield env


def _safe(message: str, env: Env) -> None:
    for leak in ("127.0.0.1", str(env.cluster.port), "SELECT", "INSERT", "postgres"):
        assert leak not in message, f"{leak!r} in {message!r}"


def test_a_store_call_gives_up_after_the_bound_with_a_safe_error(env: Env) -> None:
    store = env.executor.store
    restart = env.cluster.outage(4.0)
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailableError) as failure:
        store.load_session("anything")
    elapsed = time.monotonic() - started
    restart.join()
    assert 1.0 <= elapsed < 5.0
    assert failure.value.code == "transport_error" and failure.value.retryable
    assert failure.value.__cause__ is not None  # the driver's error, for the logs
    _safe(failure.value.message, env)
    assert store.load_session("anything") is None  # back, without anyone resetting anything


def test_a_run_that_failed_past_the_bound_completes_with_retry(env: Env) -> None:
    crash.cluster = env.cluster
    handle = env.executor.execute(ask_agent, "go")
    result = handle.result(timeout_seconds=90)
    assert crash.restart is not None
    crash.restart.join()
    assert result.status == "failed"
    # The run records the message a client may see (the driver's error, with host and port, is logged).
    assert result.error is not None and result.error.startswith("The database was unavailable")
    _safe(result.error, env)

    retried = env.executor.retry(handle.session_id)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        open_calls = env.executor.store.pending.open_calls(handle.session_id)
        if open_calls and open_calls[0].run_id == retried.run_id:
            break
        time.sleep(0.05)
    env.executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "q1", "result": "yes"}
    )
    final = retried.result(timeout_seconds=60)
    assert final.status == "completed", final.error
    assert final.output == 'told "yes"' or final.output == "told yes"
