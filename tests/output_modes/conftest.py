"""The output-mode tests share the runtime tests' fixtures: one migrated database with DBOS launched per module."""

from tests.runtime.conftest import make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]
