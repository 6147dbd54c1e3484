"""Lock managers (seed 002 "Lock Manager"): exclusion for the application's own critical sections.

helix-dbos's own runs need no lock (see :mod:`helix_dbos.lock.base`); these are for tools and jobs
that must not run twice at once across processes.
"""

from helix_dbos.lock.base import (
    AcquireOptions,
    DistributedLock,
    InMemoryLockManager,
    LockAcquisitionResult,
    LockManager,
    LockManagerBase,
    NoOpLockManager,
)
from helix_dbos.lock.postgres import PostgresLockManager

__all__ = [
    "AcquireOptions",
    "DistributedLock",
    "InMemoryLockManager",
    "LockAcquisitionResult",
    "LockManager",
    "LockManagerBase",
    "NoOpLockManager",
    "PostgresLockManager",
]
