"""Retention tests run agents on PostgreSQL with DBOS launched: the runtime tests' fixtures."""

from tests.runtime.conftest import make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]
