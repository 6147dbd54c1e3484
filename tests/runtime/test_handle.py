"""``AgentExecutionHandle`` over a fake executor: it needs nothing but the public ``RunControl`` calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from helix_dbos.agent import AgentHooks
from helix_dbos.runtime.handle import AgentExecutionHandle, RunControl
from helix_dbos.session import (
    AbortedOutcome,
    AgentResult,
    AgentState,
    CanResumeResult,
    SendInput,
    SuspendedClientToolOutcome,
)
from helix_dbos.store.base import PendingToolCall, RunRecord, SessionRecord
from helix_dbos.stream.chunks import StreamChunk

RUN = RunRecord(run_id="s-turn-1", session_id="s", turn=1, status="running", started_at=0, workflow_id="s-turn-1")


class FakeExecutor:
    def __init__(self, result: AgentResult, session: SessionRecord, pending: list[PendingToolCall]) -> None:
        self.result, self.session, self.pending = result, session, pending
        self.calls: list[tuple[str, Any]] = []

    def wait_for_result(self, run: RunRecord, agent_name: str, timeout_seconds: float | None = None) -> AgentResult:
        self.calls.append(("wait_for_result", (run.run_id, agent_name, timeout_seconds)))
        return self.result

    def get_state(self, session_id: str) -> AgentState | None:
        return AgentState(session_id=session_id, run_id=RUN.run_id, agent_type="a", stream_id=session_id)

    def get_session(self, session_id: str) -> SessionRecord | None:
        return self.session

    def list_pending_tool_calls(self, session_id: str) -> list[PendingToolCall]:
        return self.pending

    async def read_stream(self, session_id: str, from_sequence: int = 0) -> AsyncIterator[StreamChunk] | None:
        return None

    def abort(self, session_id: str, reason: str | None = None) -> None:
        self.calls.append(("abort", (session_id, reason)))

    def can_resume(self, session_id: str) -> CanResumeResult:
        return CanResumeResult(can_resume=True)

    def resume(
        self, agent: str, session_id: str, message: SendInput | None = None, *, hooks: AgentHooks | None = None
    ) -> AgentExecutionHandle:
        self.calls.append(("resume", (agent, session_id, hooks)))
        return AgentExecutionHandle(self, RUN, agent, hooks)

    def retry(
        self,
        session_id: str,
        *,
        checkpoint_id: str | None = None,
        message: SendInput | None = None,
        hooks: AgentHooks | None = None,
    ) -> AgentExecutionHandle:
        return AgentExecutionHandle(self, RUN, "a", hooks)


def session(**kwargs: Any) -> SessionRecord:
    return SessionRecord(
        session_id="s",
        agent_type="a",
        status="active",
        version=1,
        run_id=RUN.run_id,
        stream_id="s",
        created_at=0,
        updated_at=0,
        **kwargs,
    )


def test_a_handle_is_ids_plus_the_executors_public_calls() -> None:
    fake = FakeExecutor(AgentResult(status="completed", output=1), session(), [])
    executor: RunControl = fake
    hooks = AgentHooks()
    handle = AgentExecutionHandle(executor, RUN, "a", hooks)
    assert (handle.session_id, handle.run_id, handle.workflow_id) == ("s", "s-turn-1", "s-turn-1")
    assert handle.result(2.0).output == 1
    handle.abort("why")
    handle.resume()
    assert fake.calls == [
        ("wait_for_result", ("s-turn-1", "a", 2.0)),
        ("abort", ("s", "why")),
        ("resume", ("a", "s", hooks)),
    ]


def test_outcome_reads_the_pending_calls_and_the_abort_through_the_executor() -> None:
    pending = PendingToolCall(
        session_id="s",
        tool_call_id="c1",
        run_id=RUN.run_id,
        workflow_id=RUN.workflow_id,
        tool_name="locate",
        kind="client",
        arguments={"x": 1},
        arguments_digest="d",
        created_at=0,
    )
    suspended = AgentExecutionHandle(
        FakeExecutor(AgentResult(status="suspended_client_tool"), session(), [pending]), RUN, "a"
    ).outcome()
    assert isinstance(suspended, SuspendedClientToolOutcome)
    assert suspended.pending_client_tool_calls == {
        "c1": {"tool_name": "locate", "kind": "client", "arguments": {"x": 1}, "deadline_ms": None}
    }
    aborted = AgentExecutionHandle(
        FakeExecutor(AgentResult(status="suspended_client_tool"), session(aborted=True, abort_reason="stop"), []),
        RUN,
        "a",
    ).outcome()
    assert isinstance(aborted, AbortedOutcome) and aborted.reason == "stop"
