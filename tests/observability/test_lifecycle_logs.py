"""Lifecycle logs of real runs on PostgreSQL, read with caplog: one record per event, with the
session and run ids both in the message and as structured fields."""

from __future__ import annotations

import io
import json
import logging
import time
from typing import Any

import pytest

from helix_dbos import MockLLMAdapter, define_agent, define_tool
from helix_dbos.observability import configure_logging
from helix_dbos.observability.lifecycle import LOGGER_NAME
from helix_dbos.observability.log_setup import JsonFormatter
from tests.observability.test_tracing import CityIn, Out, calls, finish_with_results, text, wait_for, weather
from tests.runtime.conftest import ExecutorFactory

pytestmark = pytest.mark.postgres


@pytest.fixture
def lifecycle(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    return caplog


def events(caplog: pytest.LogCaptureFixture, session_id: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER_NAME and getattr(r, "session_id", None) == session_id]


def run_events(caplog: pytest.LogCaptureFixture, session_id: str) -> list[logging.LogRecord]:
    """The run's own events, without the ``client_tool.*`` ones of its calls (their own tests)."""
    return [r for r in events(caplog, session_id) if not r.event.startswith("client_tool.")]  # type: ignore[attr-defined]


def names(records: list[logging.LogRecord]) -> list[tuple[str, Any]]:
    return [(r.event, getattr(r, "step", None)) for r in records]  # type: ignore[attr-defined]


def test_a_run_logs_start_each_committed_step_and_completion(
    make_executor: ExecutorFactory, lifecycle: pytest.LogCaptureFixture
) -> None:
    tool = define_tool("get_weather", input_schema=CityIn, execute=weather)
    agent = define_agent("logged", system_prompt="w", llm_config="openai/fake", tools=[tool])
    executor = make_executor(
        MockLLMAdapter(
            [
                calls(("t1", "get_weather", {"city": "Paris"})),
                calls(("t2", "get_weather", {"city": "Lima"})),
                text("ok"),
            ]
        ),
        [agent],
    )
    handle = executor.execute(agent, "weather?")
    assert handle.result().status == "completed"
    found = events(lifecycle, handle.session_id)
    assert names(found) == [
        ("run_started", None),
        ("step_committed", 1),
        ("step_committed", 2),
        ("step_committed", 3),
        ("run_completed", None),
    ]
    for record in found:
        assert record.run_id == handle.run_id  # type: ignore[attr-defined]
        assert handle.session_id in record.getMessage() and handle.run_id in record.getMessage()
    started = found[0]
    assert started.getMessage().startswith(f"run started: session={handle.session_id} run={handle.run_id}")
    assert (started.agent, started.turn, started.mode, started.executor_id) == ("logged", 1, "execute", "pytest")  # type: ignore[attr-defined]
    assert all(r.duration_ms >= 0 for r in found[1:4])  # type: ignore[attr-defined]
    assert "duration_ms=" in found[1].getMessage()
    assert found[-1].steps == 3 and found[-1].levelno == logging.INFO  # type: ignore[attr-defined]


location = define_tool("get_location", description="Ask the browser", input_schema=CityIn, execute="client")


def test_suspension_and_both_kinds_of_resume_are_logged(
    make_executor: ExecutorFactory, lifecycle: pytest.LogCaptureFixture
) -> None:
    agent = define_agent(
        "hitl-logged", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location]
    )
    model = MockLLMAdapter([calls(("c1", "get_location", {"city": "?"})), finish_with_results])
    executor = make_executor(model, [agent], hot_window_seconds=0.3)
    handle = executor.execute(agent, "where?")
    assert handle.result().status == "suspended_client_tool"
    continued = executor.submit_tool_result(
        handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c1", "result": "Lyon"}
    )
    assert continued is not None and continued.result().status == "completed"
    found = run_events(lifecycle, handle.session_id)
    assert names(found) == [
        ("run_started", None),
        ("step_committed", 1),
        ("run_suspended", None),
        ("run_resumed", None),
        ("step_committed", 1),
        ("run_completed", None),
    ]
    suspended, resumed = found[2], found[3]
    assert suspended.waiting_for == ["c1"] and suspended.run_id == handle.run_id  # type: ignore[attr-defined]
    assert resumed.run_id == continued.run_id and resumed.previous_run_id == handle.run_id  # type: ignore[attr-defined]
    assert f"previous_run_id={handle.run_id}" in resumed.getMessage()


def test_a_hot_wait_answered_in_time_logs_a_resume_of_the_same_run(
    make_executor: ExecutorFactory, lifecycle: pytest.LogCaptureFixture
) -> None:
    agent = define_agent("hot-logged", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[location])
    hot = make_executor(MockLLMAdapter([calls(("c2", "get_location", {"city": "?"})), finish_with_results]), [agent])
    handle = hot.execute(agent, "where?")
    wait_for(lambda: bool(hot.list_pending_tool_calls(handle.session_id)))
    time.sleep(0.1)
    hot.submit_tool_result(handle.session_id, {"kind": "client-tool-result", "tool_call_id": "c2", "result": "Nice"})
    assert handle.result().status == "completed"
    found = run_events(lifecycle, handle.session_id)
    assert [e for e, _ in names(found)] == [
        "run_started",
        "run_resumed",
        "step_committed",
        "step_committed",
        "run_completed",
    ]
    assert found[1].run_id == handle.run_id and found[1].tool_call_ids == ["c2"]  # type: ignore[attr-defined]


def test_a_failed_run_logs_a_warning_with_its_error(
    make_executor: ExecutorFactory, lifecycle: pytest.LogCaptureFixture
) -> None:
    agent = define_agent("failing", system_prompt="x", llm_config="openai/fake", output_schema=Out, max_steps=1)
    executor = make_executor(MockLLMAdapter([text("no tool call")]), [agent])
    handle = executor.execute(agent, "go")
    result = handle.result()
    assert result.status == "failed"
    (failed,) = [r for r in events(lifecycle, handle.session_id) if r.event == "run_failed"]  # type: ignore[attr-defined]
    assert failed.levelno == logging.WARNING and failed.error == result.error  # type: ignore[attr-defined]


def test_json_format_carries_the_structured_fields() -> None:
    stream = io.StringIO()
    configure_logging("INFO", "json", stream=stream)
    try:
        logging.getLogger(LOGGER_NAME).info(
            "run started: session=s run=r", extra={"event": "run_started", "session_id": "s", "run_id": "r", "turn": 1}
        )
        logging.getLogger("helix_dbos.other").debug("not shown at INFO")
    finally:
        root = logging.getLogger("helix_dbos")
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(logging.NOTSET)
    (line,) = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["event"] == "run_started" and record["session_id"] == "s" and record["run_id"] == "r"
    assert record["turn"] == 1 and record["level"] == "INFO" and record["logger"] == LOGGER_NAME
    assert record["message"] == "run started: session=s run=r" and record["time"].endswith("Z")
    assert isinstance(JsonFormatter().format(logging.makeLogRecord({"msg": "x"})), str)


def test_bad_level_or_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log level"):
        configure_logging("LOUD", "text")
    with pytest.raises(ValueError, match="log format"):
        configure_logging("INFO", "xml")
