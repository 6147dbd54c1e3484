"""The seeds' ``client_tool.*`` structured log events (seed 001, "Structured Logger events"), on the
lifecycle logger: each once per call, with the call's fields. There is no root routing (a session's
calls are answered through its own store rows, from any process), so the ``ownership_*`` events have
nothing to report and are not emitted."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from helix_dbos import HelixError, MockLLMAdapter, define_agent, define_tool
from helix_dbos.observability.lifecycle import LOGGER_NAME
from tests.runtime.conftest import ExecutorFactory
from tests.runtime.test_hitl import CityIn, Out, calls, client_agent, finish_with_results

pytestmark = pytest.mark.postgres


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    return caplog


def client_events(caplog: pytest.LogCaptureFixture, session_id: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == LOGGER_NAME
        and getattr(r, "session_id", None) == session_id
        and str(getattr(r, "event", "")).startswith("client_tool.")
    ]


def fields(record: logging.LogRecord, *names: str) -> dict[str, Any]:
    return {n: getattr(record, n, None) for n in names}


def parked(make_executor: ExecutorFactory, name: str, **tool: Any) -> tuple[Any, Any, Any]:
    agent = client_agent(name) if not tool else None
    if agent is None:
        slow = define_tool("get_location", input_schema=CityIn, execute="client", **tool)
        agent = define_agent(name, system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[slow])
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]),
        [agent],
        hot_window_seconds=0,
    )
    handle = executor.execute(agent, "where am I?")
    assert handle.result().status == "suspended_client_tool"
    return executor, agent, handle


def test_suspended_and_submitted_are_logged_once_with_the_call(
    make_executor: ExecutorFactory, logs: pytest.LogCaptureFixture
) -> None:
    executor, _, handle = parked(make_executor, "logged-client")
    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Paris"}
    )
    assert continued is not None and continued.result().status == "completed"
    found = client_events(logs, handle.session_id)
    assert [r.event for r in found] == ["client_tool.suspended", "client_tool.submitted"]  # type: ignore[attr-defined]
    suspended, submitted = found
    assert fields(suspended, "run_id", "tool_call_id", "tool_name", "kind", "agent_type") == {
        "run_id": handle.run_id,
        "tool_call_id": "c1",
        "tool_name": "get_location",
        "kind": "client",
        "agent_type": "logged-client",
    }
    assert fields(submitted, "run_id", "tool_call_id", "tool_name", "kind", "delivery") == {
        "run_id": handle.run_id,  # the run that asked
        "tool_call_id": "c1",
        "tool_name": "get_location",
        "kind": "client-tool-result",
        "delivery": "parked",
    }
    assert isinstance(submitted.wait_ms, int) and submitted.wait_ms >= 0  # type: ignore[attr-defined]
    assert "tool_call_id=c1" in submitted.getMessage()


def test_a_submission_that_does_not_fit_logs_validation_failed(
    make_executor: ExecutorFactory, logs: pytest.LogCaptureFixture
) -> None:
    executor, _, handle = parked(make_executor, "logged-refusal")
    with pytest.raises(HelixError):
        executor.submit_tool_result(
            handle.session_id, {"kind": "approval-response", "tool_call_id": "c1", "approved": True}
        )
    with pytest.raises(HelixError):
        executor.submit_tool_result(handle.session_id, {"kind": "nonsense", "tool_call_id": "c1"})
    refused = [r for r in client_events(logs, handle.session_id) if r.event == "client_tool.validation_failed"]  # type: ignore[attr-defined]
    assert [fields(r, "tool_call_id", "tool_name", "code") for r in refused] == [
        {"tool_call_id": "c1", "tool_name": "get_location", "code": "state_conflict"},
        {"tool_call_id": "c1", "tool_name": None, "code": "validation_error"},
    ]
    assert all(getattr(r, "error", "") for r in refused)


def test_a_deadline_logs_timeout_once(make_executor: ExecutorFactory, logs: pytest.LogCaptureFixture) -> None:
    executor, _, handle = parked(make_executor, "logged-deadline", timeout_ms=1)
    time.sleep(0.05)
    executor.expire_parked_calls()
    executor.expire_parked_calls()
    timeouts = [r for r in client_events(logs, handle.session_id) if r.event == "client_tool.timeout"]  # type: ignore[attr-defined]
    assert [fields(r, "run_id", "tool_call_id", "tool_name", "timeout_ms") for r in timeouts] == [
        {"run_id": handle.run_id, "tool_call_id": "c1", "tool_name": "get_location", "timeout_ms": 1}
    ]
    # The expiry started the run's continuation: let it finish on this test's model, not the next test's.
    deadline = time.monotonic() + 30
    while (session := executor.store.load_session(handle.session_id)) is None or session.status != "completed":
        assert time.monotonic() < deadline, session
        time.sleep(0.02)


def test_an_abort_logs_each_open_call_aborted(make_executor: ExecutorFactory, logs: pytest.LogCaptureFixture) -> None:
    executor, _, handle = parked(make_executor, "logged-abort")
    executor.abort(handle.session_id, "user left")
    aborted = [r for r in client_events(logs, handle.session_id) if r.event == "client_tool.aborted"]  # type: ignore[attr-defined]
    assert [fields(r, "run_id", "tool_call_id", "reason") for r in aborted] == [
        {"run_id": handle.run_id, "tool_call_id": "c1", "reason": "user left"}
    ]


def test_a_deadline_passing_in_a_waiting_run_logs_timeout_once(
    make_executor: ExecutorFactory, logs: pytest.LogCaptureFixture
) -> None:
    slow = define_tool("get_location", input_schema=CityIn, execute="client", timeout_ms=200)
    agent = define_agent(
        "logged-hot-deadline", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[slow]
    )
    executor = make_executor(
        MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results]), [agent]
    )
    handle = executor.execute(agent, "go")
    assert handle.result().status == "completed"
    found = client_events(logs, handle.session_id)
    assert [r.event for r in found] == ["client_tool.suspended", "client_tool.timeout"]  # type: ignore[attr-defined]
    assert fields(found[1], "run_id", "tool_call_id", "timeout_ms") == {
        "run_id": handle.run_id,
        "tool_call_id": "c1",
        "timeout_ms": 200,
    }
    assert found[1].levelno == logging.WARNING
