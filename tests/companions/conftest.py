"""Companion tests run on the runtime tests' module-scoped PostgreSQL + DBOS (``tests/runtime/conftest.py``).

LiteLLM's first completion imports most of LiteLLM (seconds, more on a loaded machine); modules that
call it in-process pay that once up front (``litellm_imported``), so a test's own timeouts measure
the companions, not the import.
"""

from __future__ import annotations

import pytest

from tests.runtime.conftest import make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]


@pytest.fixture(scope="module")
def litellm_imported() -> None:
    import litellm  # noqa: F401
    import mcp  # noqa: F401  # a completion with tool calls imports it
    from litellm import acompletion  # noqa: F401
