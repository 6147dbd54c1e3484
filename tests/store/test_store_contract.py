"""The SessionStore contract (``helix_dbos.testing.store_contract``) on SQLite and PostgreSQL.

The ``store`` fixture (``tests/conftest.py``) is parametrized over both backends, so every contract
test runs once per backend. The schema checks below are the SQL store's own.
"""

from __future__ import annotations

import pytest

from helix_dbos.errors import DatabaseNotMigratedError
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.engine import create_engine_for
from helix_dbos.store.migrate import current_revision, upgrade
from helix_dbos.store.schema import SCHEMA_REVISION
from helix_dbos.testing.store_contract import (
    JointCommitContract,
    JointStartContract,
    LeafUsageContract,
    NewSessionStartContract,
    SessionStoreContract,
    TransactionalSubmitContract,
)


class TestSqlSessionStore(SessionStoreContract):
    """Every contract test, on SQLite and on PostgreSQL."""


class TestSqlSessionStoreJointTransactions(
    JointStartContract, NewSessionStartContract, JointCommitContract, TransactionalSubmitContract, LeafUsageContract
):
    """The SQL store offers every optional capability, on both backends."""


# --- schema checks -------------------------------------------------------------------------------


def test_unmigrated_database_is_refused_with_the_command_to_run(empty_database_url: str) -> None:
    with pytest.raises(DatabaseNotMigratedError) as raised:
        SqlSessionStore(empty_database_url)
    assert "helix-dbos db upgrade --database-url" in str(raised.value)


def test_upgrade_is_idempotent(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    upgrade(empty_database_url)
    engine = create_engine_for(empty_database_url)
    try:
        assert current_revision(engine) == SCHEMA_REVISION
    finally:
        engine.dispose()
    with SqlSessionStore(empty_database_url) as store:
        store.create_session("s1", agent_type="tester", custom_state={}, now_ms=1)
        assert store.session_exists("s1")
