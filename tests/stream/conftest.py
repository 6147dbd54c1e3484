"""Fixtures for the SQL stream manager's tests: a migrated database per backend, managers on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from helix_dbos.store.engine import create_engine_for
from helix_dbos.store.schema import stream_chunks, streams
from helix_dbos.stream.sql import SqlStreamManager

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest) -> str:
    """A migrated database with empty stream tables."""
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
