"""The chaos run of ``scripts/chaos.py`` as a test: worker SIGKILLs and PostgreSQL restarts under load.

The bounded run is part of the default suite (about a minute); the full one (50 sessions, 3
workers, 50 kills, 3 PostgreSQL restarts) runs with ``python -m pytest -m chaos``. Each starts its
own PostgreSQL cluster, since it stops and starts the server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.chaos import ChaosConfig, run_chaos

pytestmark = pytest.mark.postgres


@pytest.mark.timeout(420)
def test_bounded_chaos_keeps_every_invariant(tmp_path: Path) -> None:
    config = ChaosConfig(
        sessions=10,
        workers=2,
        kills=8,
        pg_restarts=2,
        pg_down=2.0,
        tools_per_session=3,
        tool_seconds=0.3,
        takeover_after=4.0,
        max_down=5.0,
        timeout=240,
        workdir=tmp_path,
        quiet=True,
    )
    report = run_chaos(config)
    print(report.table())
    assert report.ok, report.table()


@pytest.mark.chaos
@pytest.mark.timeout(1800)
def test_full_chaos_keeps_every_invariant(tmp_path: Path) -> None:
    report = run_chaos(ChaosConfig(workdir=tmp_path, quiet=True, timeout=1200))
    print(report.table())
    assert report.ok, report.table()
