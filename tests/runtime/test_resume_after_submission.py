"""The seeds' portable pattern after a client tool's answer (seed 001, "Driving the agent loop after
submitToolResult"): ``execute`` parks, ``submit_tool_result`` answers, ``resume(agent, session_id)``
drives the loop forward and its handle's ``result()`` is the continued run's."""

from __future__ import annotations

import pytest

from helix_dbos import AgentNotResumableError, MockLLMAdapter
from helix_dbos.errors import AgentAlreadyRunningError
from tests.runtime.conftest import ExecutorFactory
from tests.runtime.test_hitl import Out, calls, client_agent, finish_with_results, open_ids, wait_for

pytestmark = pytest.mark.postgres


def _parked(make_executor: ExecutorFactory, name: str) -> tuple[object, object, object]:
    agent = client_agent(name)
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]),
        [agent],
        hot_window_seconds=0,
    )
    handle = executor.execute(agent, "where am I?")
    assert handle.result().status == "suspended_client_tool"
    return executor, agent, handle


def test_resume_after_a_submission_is_the_run_the_answer_started(make_executor: ExecutorFactory) -> None:
    executor, agent, handle = _parked(make_executor, "portable")
    continued = executor.submit_tool_result(  # type: ignore[attr-defined]
        handle.session_id,  # type: ignore[attr-defined]
        {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Paris"},
    )
    assert continued is not None
    resumed = executor.resume(agent, handle.session_id)  # type: ignore[attr-defined]
    assert resumed.run_id == continued.run_id
    result = resumed.result()
    assert result.status == "completed" and result.output == Out(answer='"Paris"')
    # Once the continuation finished, the same call still answers with it, and starts nothing.
    again = executor.resume(agent, handle.session_id)  # type: ignore[attr-defined]
    assert again.run_id == continued.run_id and again.result().status == "completed"
    assert len(executor.list_runs(handle.session_id)) == 2  # type: ignore[attr-defined]


def test_resume_with_new_input_after_a_submission_keeps_its_errors(make_executor: ExecutorFactory) -> None:
    executor, agent, handle = _parked(make_executor, "portable-input")
    continued = executor.submit_tool_result(  # type: ignore[attr-defined]
        handle.session_id,  # type: ignore[attr-defined]
        {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Paris"},
    )
    assert continued is not None and continued.result().status == "completed"
    with pytest.raises((AgentNotResumableError, AgentAlreadyRunningError)):
        executor.resume(agent, handle.session_id, "and now?")  # type: ignore[attr-defined]


def test_resume_of_a_completed_run_without_a_submission_is_refused(make_executor: ExecutorFactory) -> None:
    agent = client_agent("no-submission")
    executor = make_executor(MockLLMAdapter([finish_with_results]), [agent])
    handle = executor.execute(agent, "hi")
    assert handle.result().status == "completed"
    with pytest.raises(AgentNotResumableError):
        executor.resume(agent, handle.session_id)


def test_resume_after_a_hot_answer_is_the_woken_run(make_executor: ExecutorFactory) -> None:
    agent = client_agent("portable-hot")
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "where am I?")
    wait_for(lambda: open_ids(executor, handle.session_id) == ["c1"])
    executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Lyon"}
    )
    resumed = executor.resume(agent, handle.session_id)
    assert resumed.run_id == handle.run_id
    assert resumed.result().status == "completed"
    assert len(executor.list_runs(handle.session_id)) == 1
