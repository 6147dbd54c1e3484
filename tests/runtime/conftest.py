"""Fixtures for runtime tests: one PostgreSQL database and one launched DBOS per test module.

DBOS's launch costs time (threads, recovery), so modules share a launch and tests isolate themselves
by session id. The database is a copy of the session's migrated template (``new_migrated_database``
in ``tests/conftest.py``): neither helix's nor DBOS's migrations run per module. Each test gets
its own executor (and so its own scripted model); creating one installs it as the process runtime
without touching DBOS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest
from dbos import DBOS

from helix_dbos import AgentConfig, DBOSAgentExecutor, LLMAdapter, SqlSessionStore
from helix_dbos.runtime.launch import APPLICATION_VERSION, dbos_system_database_url

ExecutorFactory = Callable[..., DBOSAgentExecutor]


@pytest.fixture(scope="module")
def runtime_db(new_migrated_database: Callable[[str], str]) -> Iterator[str]:
    """A fresh, migrated database with DBOS launched on it for the whole module."""
    url = new_migrated_database("rt")
    DBOS.destroy()
    DBOS(
        config={
            "name": "helix-dbos",
            "system_database_url": dbos_system_database_url(url),
            "application_version": APPLICATION_VERSION,
            "executor_id": "pytest",
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.01,
        }
    )
    DBOS.launch()
    yield url
    DBOS.destroy()


@pytest.fixture
def make_executor(runtime_db: str) -> Iterator[ExecutorFactory]:
    """Build executors on the module's database; all are closed after the test."""
    created: list[DBOSAgentExecutor] = []

    def factory(llm_adapter: LLMAdapter, agents: Sequence[AgentConfig] = (), **kwargs: object) -> DBOSAgentExecutor:
        executor = DBOSAgentExecutor(SqlSessionStore(runtime_db), llm_adapter=llm_adapter, agents=agents, **kwargs)  # type: ignore[arg-type]
        created.append(executor)
        return executor

    yield factory
    for executor in created:
        executor.close()
        executor.store.close()
