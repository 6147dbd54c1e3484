"""docs/differences.md maps every seed ``SessionStateStore`` method to a ``SessionStore`` (or
``PendingCallStore``) method that exists, or says why it is deliberately absent."""

from __future__ import annotations

import re
from pathlib import Path

from helix_dbos.store.base import PendingCallStore, SessionStore

DOC = Path(__file__).resolve().parents[2] / "docs" / "differences.md"

# The seeds' `interface SessionStateStore` (seed 002, "Store Interfaces"), in its order.
SEED_METHODS = [
    "createSession", "sessionExists", "deleteSession", "loadState", "saveState", "appendMessages",
    "mergeCustomState", "updateStatus", "incrementStepCount", "addSubSessionRefs", "updateSubSessionRef",
    "getSubSessionRefs", "getMessages", "getMessageCount", "truncateMessages", "getCheckpoint",
    "getLatestCheckpoint", "listCheckpoints", "createCheckpoint", "stageChanges", "getStaged",
    "promoteStaging", "discardStaging", "saveStateAndPromoteStaging", "compareAndSetStatus",
    "incrementResumeCount", "createRun", "updateRunStatus", "getCurrentRun", "listRuns",
]  # fmt: skip

PROTOCOLS = {"SessionStore": SessionStore, "PendingCallStore": PendingCallStore}
REFERENCE = re.compile(r"`(SessionStore|PendingCallStore)\.(\w+)`")


def _section() -> str:
    return DOC.read_text().split("\n## The store interface\n", 1)[1]


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in _section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_table_lists_every_seed_method_once() -> None:
    assert list(_rows()) == SEED_METHODS


def test_each_seed_method_has_a_counterpart_or_a_reason() -> None:
    for method, (counterpart, why) in _rows().items():
        if counterpart == "Deliberately absent":
            assert why, method
        else:
            assert REFERENCE.search(counterpart), (method, counterpart)


def test_the_section_names_only_methods_that_exist() -> None:
    references = REFERENCE.findall(_section())
    assert len(references) > 30
    for protocol, name in references:
        assert hasattr(PROTOCOLS[protocol], name), f"{protocol}.{name}"
