"""Fixtures for the stream managers' tests: a migrated database per SQL backend, managers on it.

Two parametrisations:

- ``stream_manager`` runs over every implementation (in-memory, SQLite, PostgreSQL): the contract
  suite (``test_stream_manager_contract.py``) takes it, and holds them all to one behaviour.
- ``backend`` / ``make_manager`` / ``manager`` run over the SQL backends only, for what only a
  durable manager has (batching, dedupe keys, several processes, NOTIFY, outages).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from helix_dbos.store.engine import create_engine_for
from helix_dbos.store.schema import stream_chunks, streams
from helix_dbos.stream.base import StreamManager
from helix_dbos.stream.memory import InMemoryStreamManager
from helix_dbos.stream.sql import SqlStreamManager

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]

ALL_MANAGERS = [pytest.param("memory", id="memory"), *BACKENDS]


def empty_database(backend: str, request: pytest.FixtureRequest) -> str:
    """The URL of a migrated ``backend`` database whose stream tables are empty."""
    if backend == "sqlite":
        return str(request.getfixturevalue("sqlite_store_url"))
    url = str(request.getfixturevalue("pg_store_url"))
    engine = create_engine_for(url)
    try:
        with engine.begin() as conn:
            conn.execute(stream_chunks.delete())
            conn.execute(streams.delete())
    finally:
        engine.dispose()
    return url


@pytest.fixture(params=ALL_MANAGERS)
def stream_manager(request: pytest.FixtureRequest) -> Iterator[StreamManager]:
    """Every :class:`StreamManager` implementation in turn, on an empty database for the SQL ones."""
    kind = str(request.param)
    if kind == "memory":
        yield InMemoryStreamManager()
        return
    manager = SqlStreamManager(empty_database(kind, request))
    yield manager
    manager.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest) -> str:
    """A migrated database with empty stream tables."""
    return empty_database(backend, request)


MakeManager = Callable[..., SqlStreamManager]


@pytest.fixture
def make_manager(db_url: str) -> Iterator[MakeManager]:
    """Managers on the test's database; each one stands for a process of its own."""
    made: list[SqlStreamManager] = []

    def make(**kwargs: Any) -> SqlStreamManager:
        manager = SqlStreamManager(db_url, **kwargs)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()


@pytest.fixture
def manager(make_manager: MakeManager) -> SqlStreamManager:
    return make_manager()
