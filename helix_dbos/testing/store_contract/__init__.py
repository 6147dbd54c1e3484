"""The ``SessionStore`` contract: one suite every store implementation passes, on every backend.

As langgraph's checkpoint conformance tests do it: a behaviour that differs between backends is a
bug in one of them. helix-dbos runs it on SQLite and PostgreSQL (``tests/store/test_store_contract.py``);
a third-party :class:`~helix_dbos.store.base.SessionStore` runs the same suite by subclassing
:class:`SessionStoreContract` in one of its test modules and providing a ``store`` fixture that
yields an empty store for each test::

    # tests/test_my_store.py
    import pytest
    from helix_dbos.testing.store_contract import SessionStoreContract

    @pytest.fixture
    def store(tmp_path):
        store = MyStore(tmp_path / "db")
        yield store
        store.close()

    class TestMyStore(SessionStoreContract):
        pass

The fixture may be parametrized (helix-dbos's runs every test once per backend). Several tests
call the store from many threads at once (concurrent creators, concurrent starts, concurrent
identical commits): the store must be safe to share between threads, as the runtime shares it.
A store that also offers the optional capabilities of :mod:`helix_dbos.store.capabilities`
subclasses their contracts too (``JointStartContract``, ``NewSessionStartContract``,
``JointCommitContract``, ``TransactionalSubmitContract``, ``LeafUsageContract``); they are not part
of :class:`SessionStoreContract`, because a store without them is complete.

Requires pytest (a test dependency, not a dependency of helix-dbos); this module is not imported by
``helix_dbos.testing``'s ``__init__`` for that reason.
"""

from helix_dbos.testing.store_contract.capabilities import (
    JointCommitContract,
    JointStartContract,
    LeafUsageContract,
    NewSessionStartContract,
    TransactionalSubmitContract,
)
from helix_dbos.testing.store_contract.forks import ForkContract
from helix_dbos.testing.store_contract.hitl import PendingCallContract
from helix_dbos.testing.store_contract.runs import RunContract
from helix_dbos.testing.store_contract.sessions import SessionContract
from helix_dbos.testing.store_contract.steps import StepContract
from helix_dbos.testing.store_contract.tenants import TenantContract

__all__ = [
    "ForkContract",
    "JointCommitContract",
    "JointStartContract",
    "LeafUsageContract",
    "NewSessionStartContract",
    "PendingCallContract",
    "RunContract",
    "SessionContract",
    "SessionStoreContract",
    "StepContract",
    "TenantContract",
    "TransactionalSubmitContract",
]


class SessionStoreContract(
    SessionContract, RunContract, StepContract, PendingCallContract, ForkContract, TenantContract
):
    """The whole contract as pytest test methods over a ``store`` fixture the subclass's module provides.

    Each test expects an empty store (no sessions). Subclass it as ``Test<Something>`` so that
    pytest collects it; this base class itself is not collected. The parts (``SessionContract``,
    ``RunContract``, ``StepContract``, ``PendingCallContract``, ``ForkContract``, ``TenantContract``) can be
    subclassed alone.
    """
