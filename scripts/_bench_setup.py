"""Shared set-up of the benchmark scripts: a migrated PostgreSQL database and a configured DBOS."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from dbos import DBOS

from helix_dbos import upgrade
from helix_dbos.runtime.launch import dbos_config_for

DATABASE_URL_ENV = "HELIX_BENCH_DATABASE_URL"


@contextmanager
def bench_database(url: str | None, prefix: str) -> Iterator[str]:
    """A migrated database: ``url`` (or ``HELIX_BENCH_DATABASE_URL``), else a throw-away cluster's."""
    url = url or os.environ.get(DATABASE_URL_ENV)
    cluster = None
    if url is None:
        from scripts._bench_pg import PRELOAD_OPTIONS
        from tests.pg import create_database, start_local_cluster, unique_name

        cluster = start_local_cluster()
        # Restart with pg_stat_statements preloaded, for the per-statement accounting.
        cluster.extra_options = f"{cluster.extra_options} {PRELOAD_OPTIONS}"
        cluster.crash()
        cluster.start()
        url = create_database(cluster.url, unique_name(prefix))
    try:
        upgrade(url)
        yield url
    finally:
        if cluster is not None:
            cluster.stop()


def configure_dbos(url: str, *, dbos_engine: bool = False, no_queues: bool = False) -> None:
    """Configure (not launch) DBOS on ``url`` as ``helix_dbos.launch`` does (its own config builder).

    ``dbos_engine`` keeps DBOS's own engine settings for the system database (bare DBOS as its users
    get it) rather than those ``launch`` changes (``SYSTEM_DATABASE_ENGINE_KWARGS``).

    ``no_queues``: the process dequeues from DBOS's internal queues only. A bare DBOS app sharing the
    benchmark's database with helix-dbos's processes (same application name) would otherwise find
    helix-dbos's queues in DBOS's queue table (the double-texting tickets') and poll them, a cost
    the app itself does not have.
    """
    config = dbos_config_for(url)
    if dbos_engine:
        config.pop("db_engine_kwargs", None)
    DBOS(config=config)
    if no_queues:
        DBOS.listen_queues([])
