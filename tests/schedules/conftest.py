"""Fixtures for the agent schedule tests: DBOS launched once per module, as ``helix_dbos.launch`` configures it.

The schedules are DBOS's own (its ``workflow_schedules`` table, its scheduler thread), so the tests
launch DBOS with helix's configuration (``dbos_config_for``: the scheduler polls every second)
rather than the runtime tests' bare one. The agents run on the real LiteLLM client against the
scripted OpenAI-compatible server. ``scheduled`` builds one executor per test and deletes the
schedules the test created before it closes the executor, so no fire outlives its runtime.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dbos import DBOS

from helix_dbos import DBOSAgentExecutor, SqlSessionStore
from helix_dbos.errors import HelixError
from helix_dbos.runtime.launch import dbos_config_for
from helix_dbos.runtime.schedules import ScheduleFire
from helix_dbos.testing import ScriptedOpenAIServer, ScriptedResponse
from tests.schedules.agents import reporter


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAIServer]:
    """One scripted server per module, answering ``ok`` to every request."""
    server = ScriptedOpenAIServer(handler=lambda body: ScriptedResponse(text="ok"))
    server.start()
    yield server
    server.stop()


def _launch(url: str) -> None:
    DBOS.destroy()
    config = dbos_config_for(url, executor_id="pytest-schedules")
    config["notification_listener_polling_interval_sec"] = 0.01
    DBOS(config=config)
    DBOS.launch()


@pytest.fixture(scope="module")
def schedule_db(new_migrated_database: Callable[[str], str]) -> Iterator[str]:
    """A fresh migrated PostgreSQL database with DBOS launched on it for the module."""
    url = new_migrated_database("sched")
    _launch(url)
    yield url
    DBOS.destroy()


@dataclass
class Scheduled:
    """The test's executor, plus the schedule names to delete when it ends."""

    executor: DBOSAgentExecutor
    names: list[str] = field(default_factory=list)

    def wait_fires(self, name: str, count: int, timeout: float = 20.0) -> list[ScheduleFire]:
        """Wait until ``name`` has at least ``count`` fires whose run started (or was skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            fires = [f for f in self.executor.schedules.fires(name, limit=1000) if f.outcome is not None]
            if len(fires) >= count:
                return fires
            assert time.monotonic() < deadline, f"{len(fires)} fires of {name} after {timeout} s"
            time.sleep(0.1)

    def settle(self, name: str, timeout: float = 20.0) -> list[ScheduleFire]:
        """Pause ``name``, let the fires already due land, and return them all once each has run."""
        self.executor.schedules.pause(name)
        time.sleep(1.5)  # the scheduler's poll (1 s) sees the pause; a fire already due still lands
        deadline = time.monotonic() + timeout
        while True:
            fires = self.executor.schedules.fires(name, limit=1000)
            if all(f.outcome is not None for f in fires):
                return fires
            assert time.monotonic() < deadline, [f.workflow_status for f in fires]
            time.sleep(0.1)


@pytest.fixture
def scheduled(schedule_db: str, llm: ScriptedOpenAIServer) -> Iterator[Scheduled]:
    executor = DBOSAgentExecutor(SqlSessionStore(schedule_db), agents=[reporter(llm.base_url)])
    state = Scheduled(executor)
    yield state
    for info in executor.schedules.list():
        executor.schedules.delete(info.schedule.name)
    time.sleep(1.5)  # fires already enqueued run before the runtime goes away
    for session in executor.store.list_sessions(status="active", limit=1000):
        with contextlib.suppress(HelixError):
            executor.abort(session.session_id, "test teardown")
    executor.close()
    executor.store.close()


@pytest.fixture
def sqlite_scheduled(tmp_path: Path, llm: ScriptedOpenAIServer) -> Iterator[Scheduled]:
    """The same on the embedded SQLite default (``helix_dbos.launch`` on a fresh file)."""
    from helix_dbos import launch, shutdown

    DBOS.destroy()
    executor = launch(f"sqlite:///{tmp_path / 'helix.sqlite'}", agents=[reporter(llm.base_url)], executor_id="sqlite")
    yield Scheduled(executor)
    for info in executor.schedules.list():
        executor.schedules.delete(info.schedule.name)
    time.sleep(1.5)
    shutdown(executor)
