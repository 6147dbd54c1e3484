"""One logging approach: the seeds' ``Logger`` is an adapter over stdlib ``logging``, not a second system."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import helix_dbos
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


_FAILING_SKILLS = """
import asyncio
from helix_dbos.orchestration.step_processor import coerce_tool_call_arguments
from helix_dbos.skills.catalog import resolve_skills_catalog

class Broken:
    async def list_skills(self):
        raise RuntimeError("skills store is down")

assert asyncio.run(resolve_skills_catalog(Broken())) == ""
assert coerce_tool_call_arguments("[1, 2]") == {}
print("done")
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter importing this checkout's helix_dbos."""
    env = {**os.environ, "PYTHONPATH": str(Path(helix_dbos.__file__).parents[1])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False, env=env)


def test_a_script_that_configures_no_logging_sees_nothing_on_stderr(tmp_path: Path) -> None:
    """The seeds' default logger is silent; in Python that is a NullHandler on the package logger."""
    script = tmp_path / "script.py"
    script.write_text(_FAILING_SKILLS)
    done = _run(str(script))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    assert done.stderr == ""


def test_the_command_line_still_shows_warnings(tmp_path: Path) -> None:
    """The command line is an application: it configures logging, so a command's warnings reach stderr."""
    script = tmp_path / "cli.py"
    script.write_text(
        "import sys\n"
        "import helix_dbos.cli as cli\n"
        "def app():\n"
        "    exec(open(sys.argv[1]).read(), {})\n"
        "cli.app = app\n"
        "cli.main()\n"
    )
    (tmp_path / "failing.py").write_text(_FAILING_SKILLS)
    done = _run(str(script), str(tmp_path / "failing.py"))
    assert done.returncode == 0, done.stderr
    assert "skill provider failed to list skills" in done.stderr
    assert "skills store is down" in done.stderr
    assert "non-object tool-call input coerced" in done.stderr
