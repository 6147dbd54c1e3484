"""A run stopped by an abort ends with the reason it recorded, on replay too.

The abort's reason is the run's error. The run used to read it from the store in workflow code,
unrecorded, so a replay (recovery, a fork) after the stored reason changed returned another error
than the run had. It is now read in the ``{agent}.stop_reason`` step, behind the
``helix-recorded-stop-reason`` replay patch; a run recorded before the patch replays as written.
"""

from __future__ import annotations

from typing import Any

import pytest
from dbos import DBOS

from helix_dbos import MockLLMAdapter
from helix_dbos.runtime.abort import durable_stop_reason
from helix_dbos.runtime.hitl import wake_run
from helix_dbos.runtime.run_context import RunContext
from helix_dbos.store.engine import now_ms
from tests.runtime.conftest import ExecutorFactory
from tests.runtime.test_hitl import calls, client_agent, open_ids, wait_for

pytestmark = pytest.mark.postgres


def _abort_in_store(executor: Any, session_id: str, run_id: str, reason: str) -> None:
    """What ``abort`` records, without cancelling the workflow: the run itself sees it and ends."""
    executor.store.finish_run(
        session_id,
        run_id,
        session_status="failed",
        run_status="failed",
        error=f"aborted: {reason}",
        aborted=True,
        abort_reason=reason,
        now_ms=now_ms(),
    )


def _aborted_run_then_replayed(make_executor: ExecutorFactory, name: str) -> tuple[list[str], str, str]:
    """Abort a waiting run with one reason, change the stored reason, replay the whole recorded run.

    Returns the recorded step names, the run's error and the replay's error.
    """
    agent = client_agent(name)
    executor = make_executor(MockLLMAdapter([calls(("c1", "get_location", {"city": "?"}))]), [agent])
    handle = executor.execute(agent, "go")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    _abort_in_store(executor, handle.session_id, handle.run_id, "first reason")
    wake_run(handle.workflow_id, "abort", executor.logger)
    first: dict[str, Any] = DBOS.retrieve_workflow(handle.workflow_id).get_result()
    steps = DBOS.list_workflow_steps(handle.workflow_id)
    _abort_in_store(executor, handle.session_id, handle.run_id, "second reason")
    # A fork past the last recorded step replays every step from its record: workflow code alone runs.
    replay = DBOS.fork_workflow(handle.workflow_id, max(s["function_id"] for s in steps) + 1)
    replayed: dict[str, Any] = replay.get_result()
    return [s["function_name"] for s in steps], first["error"], replayed["error"]


def test_a_replayed_aborted_run_ends_with_the_reason_it_recorded(make_executor: ExecutorFactory) -> None:
    names, error, replayed = _aborted_run_then_replayed(make_executor, "stop-reason-replay")
    assert names[-3:] == [
        "DBOS.patch-helix-recorded-stop-reason",
        "stop-reason-replay.stop_reason",
        "stop-reason-replay.finalize",
    ]
    assert error == "aborted: first reason"
    assert replayed == "aborted: first reason"  # not the reason the store holds now


def test_a_run_recorded_before_the_patch_replays_as_it_was_written(
    make_executor: ExecutorFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded by the old code (no patch, no step: a store read), it replays without a
    nondeterminism error: the patch finds the finalize step at its position and answers no."""

    def read_in_workflow_code(self: RunContext) -> str:
        return durable_stop_reason(self.rt.store, self.who.session_id) or "aborted"

    with monkeypatch.context() as legacy:
        legacy.setattr(RunContext, "abort_error", read_in_workflow_code)
        agent = client_agent("stop-reason-legacy")
        executor = make_executor(MockLLMAdapter([calls(("c1", "get_location", {"city": "?"}))]), [agent])
        handle = executor.execute(agent, "go")
        wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
        _abort_in_store(executor, handle.session_id, handle.run_id, "first reason")
        wake_run(handle.workflow_id, "abort", executor.logger)
        first: dict[str, Any] = DBOS.retrieve_workflow(handle.workflow_id).get_result()
        steps = DBOS.list_workflow_steps(handle.workflow_id)
    names = [s["function_name"] for s in steps]
    assert names[-1] == "stop-reason-legacy.finalize" and "stop-reason-legacy.stop_reason" not in names
    assert first["error"] == "aborted: first reason"
    _abort_in_store(executor, handle.session_id, handle.run_id, "second reason")
    replayed: dict[str, Any] = DBOS.fork_workflow(
        handle.workflow_id, max(s["function_id"] for s in steps) + 1
    ).get_result()
    assert replayed["status"] == "failed"
    assert replayed["error"] == "aborted: second reason"  # as that version read it: from the store
