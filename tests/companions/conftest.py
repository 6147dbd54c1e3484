"""Companion tests run on the runtime tests' module-scoped PostgreSQL + DBOS (``tests/runtime/conftest.py``)."""

from tests.runtime.conftest import make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]
