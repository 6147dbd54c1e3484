"""One logging approach: the seeds' ``Logger`` is an adapter over stdlib ``logging``, not a second system."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from helix_dbos.logger import StdLogger, console_logger, noop_logger, std_logger
from helix_dbos.orchestration.step_processor import coerce_tool_call_arguments


def test_the_seeds_logger_writes_to_the_stdlib_logger_with_its_data_as_extra(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="helix_dbos.test"):
        log = std_logger("helix_dbos.test")
        log.debug("d")
        log.info("i", {"run_id": "r1"})
        log.warn("w")
        log.error("e", {"session_id": "s1"})
    records = [r for r in caplog.records if r.name == "helix_dbos.test"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.DEBUG, "d"),
        (logging.INFO, "i {'run_id': 'r1'}"),
        (logging.WARNING, "w"),
        (logging.ERROR, "e {'session_id': 's1'}"),
    ]
    assert records[1].data == {"run_id": "r1"}  # type: ignore[attr-defined]
    assert all(r.pathname == __file__ for r in records)  # the caller's line, not the adapter's


def test_console_logger_is_the_adapter_on_the_package_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="helix_dbos"):
        console_logger.warn("careful")
        noop_logger.warn("never seen")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("helix_dbos", "careful")]


def test_orchestration_logs_through_stdlib_when_no_logger_is_given(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="helix_dbos.orchestration"):
        assert coerce_tool_call_arguments("[1, 2]") == {}
    assert [r.name for r in caplog.records] == ["helix_dbos.orchestration"]
    assert "coerced" in caplog.records[0].getMessage()


def test_the_executor_defaults_to_the_stdlib_adapter(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SqlSessionStore, upgrade

    url = f"sqlite:///{tmp_path / 'helix.sqlite'}"
    upgrade(url)
    executor = DBOSAgentExecutor(SqlSessionStore(url), llm_adapter=MockLLMAdapter([]))
    try:
        assert isinstance(executor.logger, StdLogger)
        with caplog.at_level(logging.WARNING, logger="helix_dbos.runtime"):
            executor.logger.warn("x")
        assert [(r.name, r.getMessage()) for r in caplog.records] == [("helix_dbos.runtime", "x")]
    finally:
        executor.close()
