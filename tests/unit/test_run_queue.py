"""``RunQueue``: the one-line spec the CLI and ``HELIX_RUN_QUEUE`` take, and priority bounds."""

from __future__ import annotations

import pytest

from helix_dbos import HelixError
from helix_dbos.runtime.queues import DEFAULT_WORKER_CONCURRENCY, RateLimit, RunQueue, check_priority


def test_queue_specs_parse() -> None:
    assert RunQueue.parse("jobs:concurrency=8,worker_concurrency=2,limit=100/60,poll=0.05") == RunQueue(
        name="jobs",
        concurrency=8,
        worker_concurrency=2,
        limiter=RateLimit(limit=100, period_seconds=60),
        polling_interval_sec=0.05,
    )
    assert RunQueue.parse("") == RunQueue()
    assert RunQueue.parse("jobs:concurrency=8,tenant_concurrency=2") == RunQueue(
        name="jobs", concurrency=8, tenant_concurrency=2
    )
    bad_specs = ("jobs:concurrency", "jobs:limit=5", "jobs:speed=3", "jobs:concurrency=0", "bad name")
    # A tenant's share above the whole queue's cap would let one tenant fill it: refused.
    for bad in (*bad_specs, "jobs:tenant_concurrency=0", "jobs:concurrency=2,tenant_concurrency=3"):
        with pytest.raises(ValueError):
            RunQueue.parse(bad)


def test_a_worker_runs_a_bounded_number_of_queued_runs_unless_told_otherwise() -> None:
    # Each queued run in flight holds a DBOS executor thread: the default caps them per worker.
    assert RunQueue().worker_concurrency == RunQueue().worker_cap == DEFAULT_WORKER_CONCURRENCY
    assert RunQueue.parse("jobs:worker_concurrency=none").worker_cap is None
    assert RunQueue(worker_concurrency=None, concurrency=8).worker_cap is None
    # A smaller global cap lowers the default (DBOS refuses a worker cap above the global one)...
    assert RunQueue(concurrency=4).worker_cap == 4
    assert RunQueue.parse("jobs:concurrency=500").worker_cap == DEFAULT_WORKER_CONCURRENCY
    # ...but a worker cap set above it is a mistake, refused when the queue is built.
    with pytest.raises(ValueError, match="worker_concurrency must not exceed concurrency"):
        RunQueue(concurrency=4, worker_concurrency=8)


def test_priorities_outside_dboss_range_are_refused() -> None:
    check_priority(None)
    check_priority(1)
    check_priority(2**31 - 1)
    for bad in (0, -1, 2**31):
        with pytest.raises(HelixError):
            check_priority(bad)


def test_serve_no_execute_needs_a_queue_and_bad_specs_are_one_line() -> None:
    from typer.testing import CliRunner

    from helix_dbos.cli import app

    runner = CliRunner()
    alone = runner.invoke(app, ["serve", "--agents", "demo", "--allow-unauthenticated", "--no-execute"])
    assert alone.exit_code == 2 and "--no-execute needs --queue" in alone.output
    bad = runner.invoke(app, ["worker", "--agents", "demo", "--queue", "jobs:speed=3"])
    assert bad.exit_code == 2 and "bad --queue" in bad.output


def test_the_command_lines_help_states_the_default_worker_cap() -> None:
    """The CLI spells the cap out (it does not import the runtime to read it): kept equal here."""
    from helix_dbos.cli.common import QueueSpec

    assert f"at most {DEFAULT_WORKER_CONCURRENCY} queued runs" in QueueSpec.__metadata__[0].help
