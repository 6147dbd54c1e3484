"""Shared fixtures, by section. Add new sections below; keep helpers in their own modules.

PostgreSQL (``tests/pg.py``): ``$HELIX_TEST_DATABASE_URL`` if set, else a throw-away local cluster
started once per test session. Any test that uses a PostgreSQL fixture is marked ``postgres``
automatically (``pytest -m "not postgres"`` runs without a server).

- ``pg_server_url`` (session): the server's maintenance database; create your own databases on it.
- ``pg_database_url``: a brand-new empty database for one test (DBOS system databases, migrations).
- ``new_migrated_database`` (session): ``new_migrated_database(prefix)`` returns the URL of a new
  database with helix's tables and DBOS's system tables already in place, copied from a template
  migrated once per session (a copy takes a fraction of the ~2-3 s the two migrations take, and a
  worker process launched on it skips DBOS's migrations). Tests that launch on it test launching,
  not migrating: those that prove migrations or a first launch use ``pg_database_url``.

Session stores (``helix_dbos.store``):

- ``pg_store`` / ``sqlite_store``: a migrated, empty :class:`SqlSessionStore` per test. PostgreSQL
  shares one database migrated once per session (``pg_store_url``) and empties it per test;
  SQLite copies a migrated template file into ``tmp_path`` (``sqlite_store_url``).
- ``store``: parametrized over both backends - the fixture for contract tests.
- ``empty_database_url``: parametrized over both backends, a database without helix tables.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pg
import pytest
import sqlalchemy as sa

from helix_dbos._litellm_import import OFFLINE_SWITCHES
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.migrate import upgrade
from helix_dbos.store.schema import ALL_TABLES

# The suite runs offline. helix-dbos sets LiteLLM's offline switches right before its own first
# import of LiteLLM; tests (``pytest.importorskip("litellm")``) and the processes they start may
# import it first, so the whole session sets them up front.
for _name, _value in OFFLINE_SWITCHES:
    os.environ.setdefault(_name, _value)

# --- PostgreSQL server ----------------------------------------------------------------------------

_PG_FIXTURES = frozenset({"pg_server_url", "new_migrated_database"})


# --- test order ------------------------------------------------------------------------------------
#
# The default run spreads whole files over pytest-xdist workers in collection order (``addopts``:
# ``--dist loadfile --no-loadscope-reorder``). These files take a minute or more of one worker each
# (measured, ``--durations``): they go first, so that no worker starts one while the others finish.

LONG_FILES_FIRST = (
    "tests/service/test_fuzz_openapi.py",
    "tests/chaos/test_chaos.py",
    "tests/test_readme.py",
    "tests/scale/test_scale_out.py",
    "tests/test_cli.py",
    "tests/cli/test_sessions.py",
    "tests/runtime/test_crash_recovery.py",
    "tests/test_lean_install.py",  # ~30 s, most of it pip installing the core into a clean venv
)


def _file_rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return LONG_FILES_FIRST.index(path) if path in LONG_FILES_FIRST else len(LONG_FILES_FIRST)


DEFAULT_WORKERS = 3
"""xdist workers for a whole run (``addopts``' ``-n auto``): about 9-10 min on 2 cores, against 18 with none."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many xdist workers ``-n auto`` starts: none for one test file, one per file up to three.

    Each worker pays ~4 s of imports and its own PostgreSQL cluster, which a whole run earns back
    many times over; a run of one small file (``pytest tests/unit/test_public_api.py``) took 13 s on
    three workers and 1.6 s in one process. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` or an explicit ``-n N``
    still decide.
    """
    from_env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if from_env:
        return int(from_env)
    named = {arg.split("::", 1)[0] for arg in config.args}
    if named and all(Path(path).is_file() for path in named):
        return 0 if len(named) == 1 else min(DEFAULT_WORKERS, len(named))
    return DEFAULT_WORKERS


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _PG_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)
    items.sort(key=_file_rank)  # stable: each file keeps its own order


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """URL of a PostgreSQL server's maintenance database, for the whole test session."""
    env_url = os.environ.get(pg.ENV_URL)
    if env_url:
        yield env_url
        return
    try:
        cluster = pg.start_local_cluster()
    except RuntimeError as error:
        # On a developer machine without PostgreSQL, skip its tests with the reason; in CI (or with
        # HELIX_REQUIRE_POSTGRES=1) a missing server is a failure, never half a suite passing green.
        if os.environ.get("CI") or os.environ.get("HELIX_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL is required here but could not be started: {error}")
        pytest.skip(str(error))
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture
def pg_database_url(pg_server_url: str) -> Iterator[str]:
    """A brand-new, empty database for one test, dropped afterwards."""
    name = pg.unique_name("helix_test")
    url = pg.create_database(pg_server_url, name)
    yield url
    pg.drop_database(pg_server_url, name)


@pytest.fixture(scope="session")
def new_migrated_database(pg_server_url: str) -> Iterator[Callable[[str], str]]:
    """A factory of new databases copied from one migrated (helix + DBOS) template (kept, like ``runtime_db``'s)."""
    from dbos import DBOS

    from helix_dbos.runtime.launch import dbos_system_database_url

    template = pg.unique_name("helix_template")
    url = pg.create_database(pg_server_url, template)
    upgrade(url)
    DBOS.migrate(dbos_system_database_url(url))

    def new(prefix: str) -> str:
        return pg.create_database_from_template(pg_server_url, pg.unique_name(prefix), template)

    yield new
    pg.drop_database(pg_server_url, template)


# --- session stores -------------------------------------------------------------------------------

STORE_BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
_STORE_FIXTURES = {"sqlite": "sqlite_store", "postgres": "pg_store"}


def _empty_helix_tables(engine: sa.Engine) -> None:
    # DELETE beats TRUNCATE on tables holding a handful of rows.
    with engine.begin() as conn:
        for table in ALL_TABLES:
            conn.execute(table.delete())


@pytest.fixture(scope="session")
def pg_store_url(pg_server_url: str) -> Iterator[str]:
    """A database migrated once for the session; ``pg_store`` empties it before each test."""
    name = pg.unique_name("helix_store")
    url = pg.create_database(pg_server_url, name)
    upgrade(url)
    yield url
    pg.drop_database(pg_server_url, name)


@pytest.fixture
def pg_store(pg_store_url: str) -> Iterator[SqlSessionStore]:
    """A :class:`SqlSessionStore` on an empty, migrated PostgreSQL database."""
    store = SqlSessionStore(pg_store_url)
    _empty_helix_tables(store.engine)
    yield store
    store.close()


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "helix.sqlite"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def sqlite_store_url(tmp_path: Path, _sqlite_template: Path) -> str:
    """URL of a migrated SQLite file of this test's own (a copy of a template migrated once)."""
    path = tmp_path / "helix.sqlite"
    shutil.copyfile(_sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_store(sqlite_store_url: str) -> Iterator[SqlSessionStore]:
    """A :class:`SqlSessionStore` on an empty, migrated SQLite file."""
    store = SqlSessionStore(sqlite_store_url)
    yield store
    store.close()


@pytest.fixture(params=STORE_BACKENDS)
def store(request: pytest.FixtureRequest) -> SqlSessionStore:
    """The store under contract test: once per backend."""
    result: SqlSessionStore = request.getfixturevalue(_STORE_FIXTURES[request.param])
    return result


@pytest.fixture(params=STORE_BACKENDS)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database without helix tables: once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.sqlite'}"
    url: str = request.getfixturevalue("pg_database_url")
    return url
