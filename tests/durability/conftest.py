"""Fixtures for fault tests: a PostgreSQL cluster of their own that the tests crash and restart.

The cluster is separate from the session-wide one (``tests/pg.py``), so stopping it with
``pg_ctl stop -m immediate`` disturbs no other test. It restarts on the same port, which is what a
client pool sees when a database server restarts or fails over behind a stable address.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import pg


@pytest.fixture(scope="module")
def crash_cluster() -> Iterator[pg.LocalCluster]:
    """A throw-away cluster this module may crash (``outage``) and restart at will."""
    try:
        cluster = pg.start_local_cluster(crash_safe=True)
    except RuntimeError as error:
        if os.environ.get("CI") or os.environ.get("HELIX_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL is required here but could not be started: {error}")
        pytest.skip(f"fault tests need local PostgreSQL server binaries: {error}")
    try:
        yield cluster
    finally:
        cluster.stop()
