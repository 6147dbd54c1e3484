"""The private DBOS names helix-dbos relies on exist in the DBOS version it pins, and mean what it assumes.

A DBOS upgrade fails here first: check ``helix_dbos/runtime/_dbos_compat.py`` against the new
version, then update :data:`DBOS_VERSION`.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import dbos
from dbos import DBOS

import helix_dbos
from helix_dbos.runtime._dbos_compat import DBOS_VERSION, AwaitedWorkflowCancelledError


def test_the_installed_dbos_is_the_version_the_compat_module_was_checked_against() -> None:
    assert importlib.metadata.version("dbos") == DBOS_VERSION


def test_the_names_used_are_what_they_are_assumed_to_be() -> None:
    assert issubclass(AwaitedWorkflowCancelledError, Exception)
    assert AwaitedWorkflowCancelledError.__module__.startswith("dbos")
    for name in ("list_workflows", "resume_workflow"):  # the public re-enqueue path
        assert callable(getattr(DBOS, name)) and callable(getattr(dbos.DBOSClient, name))


def test_dbos_control_exceptions_pass_except_exception_and_its_errors_do_not() -> None:
    """The loop records anything ``except Exception`` catches as the run's failure: DBOS's unwinding
    (cancelled, no longer owned) must not be caught there, its ordinary errors must."""
    from dbos._error import (
        DBOSConflictingWorkflowError,
        DBOSException,
        DBOSWorkflowCancelledError,
        DBOSWorkflowConflictIDError,
    )

    for control in (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
        assert issubclass(control, BaseException) and not issubclass(control, Exception), control
    assert issubclass(DBOSConflictingWorkflowError, DBOSException) and issubclass(DBOSException, Exception)


def test_no_module_but_the_compat_module_imports_private_dbos_names() -> None:
    package = Path(helix_dbos.__file__).parent
    offenders = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "_dbos_compat.py" and re.search(r"\b(dbos|DBOS)\._", path.read_text())  # not helix_dbos._x
    ]
    # store/retry.py names DBOS's retry helpers in its docstring only (where its model comes from).
    assert offenders == ["store/retry.py"], offenders
