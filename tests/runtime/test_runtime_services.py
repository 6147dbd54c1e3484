"""The process-global runtime: one executor at a time, never silently replaced."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helix_dbos import DBOSAgentExecutor, HelixError, SqlSessionStore, upgrade
from helix_dbos.llm.mock import MockLLMAdapter
from helix_dbos.runtime import services


@pytest.fixture
def new_executor(tmp_path: Path) -> Iterator[Callable[[], DBOSAgentExecutor]]:
    """Executors on one migrated SQLite file (installing needs no DBOS and no PostgreSQL)."""
    url = f"sqlite:///{tmp_path / 'runtime.db'}"
    upgrade(url)
    stores: list[SqlSessionStore] = []

    def make() -> DBOSAgentExecutor:
        stores.append(SqlSessionStore(url))
        return DBOSAgentExecutor(stores[-1], llm_adapter=MockLLMAdapter())

    yield make
    for store in stores:
        store.close()


def test_a_second_executor_while_one_is_installed_is_refused_with_a_clear_message(
    new_executor: Callable[[], DBOSAgentExecutor],
) -> None:
    first = new_executor()
    try:
        with pytest.raises(HelixError, match="already installed") as caught:
            new_executor()
        assert "close" in str(caught.value)
        assert services.current().store is first.store  # the first one is still the runtime
    finally:
        first.close()


def test_reinstalling_the_same_services_is_fine_and_close_makes_room_for_a_new_executor(
    new_executor: Callable[[], DBOSAgentExecutor],
) -> None:
    first = new_executor()
    installed = services.current()
    services.install(installed)  # idempotent
    first.close()
    second = new_executor()
    try:
        assert services.current().store is second.store
    finally:
        second.close()
