"""Builders the contract's tests share: a fake clock, run starts and step commits with defaults.

Public so that a third party's own tests of its store can build the same fixtures.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from helix_dbos.messages import AssistantMessage, Message, ToolCallRequest, ToolResultMessage, UserMessage
from helix_dbos.store.base import (
    CommitResult,
    PendingToolCall,
    SessionStore,
    StartRun,
    StartRunResult,
    StepCommit,
    UsageRecord,
)

T = TypeVar("T")

_clock = itertools.count(1_700_000_000_000, 1000)


def now() -> int:
    """A strictly increasing fake clock, so ordering by time is deterministic."""
    return next(_clock)


def start(
    store: SessionStore,
    session_id: str = "s1",
    run_id: str = "r1",
    *,
    new: bool = True,
    text: str = "hello",
    **kwargs: Any,
) -> StartRunResult:
    return store.start_run(
        StartRun(
            session_id=session_id,
            run_id=run_id,
            workflow_id=f"wf-{run_id}",
            agent_type="tester",
            new_session_state={"n": 0} if new else None,
            input_messages=[UserMessage(content=text)],
            now_ms=now(),
            **kwargs,
        )
    )


def commit(
    store: SessionStore,
    step: int,
    first_sequence: int,
    messages: list[Message],
    *,
    session_id: str = "s1",
    run_id: str = "r1",
    state: dict[str, Any] | None = None,
    usage: list[UsageRecord] | None = None,
    **kwargs: Any,
) -> CommitResult:
    return store.commit_step(
        StepCommit(
            session_id=session_id,
            run_id=run_id,
            step_count=step,
            first_sequence=first_sequence,
            messages=messages,
            custom_state=state if state is not None else {"n": step},
            usage=usage or [],
            now_ms=now(),
            **kwargs,
        )
    )


def tool_step(call_id: str) -> list[Message]:
    return [
        AssistantMessage(tool_calls=[ToolCallRequest(id=call_id, name="search", arguments={"z": 1, "a": 2})]),
        ToolResultMessage(tool_call_id=call_id, tool_name="search", content='{"ok": true}'),
    ]


def finish(store: SessionStore, step: int, first_sequence: int, **kwargs: Any) -> CommitResult:
    return commit(
        store,
        step,
        first_sequence,
        [AssistantMessage(content="done")],
        session_status="completed",
        run_status="completed",
        checkpoint_status="completed",
        output={"answer": 42},
        **kwargs,
    )


def pending_call(call_id: str, *, deadline_ms: int | None = None) -> PendingToolCall:
    """An approval-gated call of run ``r1`` in session ``s1``."""
    return PendingToolCall(
        session_id="s1",
        tool_call_id=call_id,
        run_id="r1",
        workflow_id="wf-r1",
        tool_name="deploy",
        kind="approval",
        arguments={"env": "prod"},
        arguments_digest="digest",
        deadline_ms=deadline_ms,
        created_at=now(),
    )


def race(n: int, fn: Callable[[int], T]) -> list[T | BaseException]:
    """Run ``fn(i)`` in ``n`` threads released together; collect results and exceptions."""
    barrier = threading.Barrier(n)
    results: list[T | BaseException] = [RuntimeError("not run")] * n

    def worker(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as error:
            results[i] = error

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


__all__ = ["commit", "finish", "now", "pending_call", "race", "start", "tool_step"]
