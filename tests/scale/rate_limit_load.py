"""A rate-limited load in real processes: one API server, workers, a scripted provider with a quota.

Used by ``tests/scale/test_rate_limits.py`` and ``scripts/bench_rate_limits.py``. The provider is
:class:`~helix_dbos.testing.ScriptedOpenAIServer` in rate-limit mode (``429`` above ``N``
requests in any second, by its own clock); every run of ``tests.scale.rate_limited_agents`` makes
one LiteLLM call to it. The figures come from the server's timestamps (what the provider saw) and
from DBOS's rows of the admission workflows (how long each call waited to be admitted).
"""

from __future__ import annotations

import bisect
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from helix_dbos.runtime.launch import dbos_system_database_url
from helix_dbos.runtime.rate_limits import ADMISSION_WORKFLOW_NAME, ProviderRateLimit
from helix_dbos.store.engine import to_sqlalchemy_url
from helix_dbos.testing import ScriptedOpenAIServer
from tests.scale.deployment import Deployment
from tests.scale.rate_limited_agents import WARM_UP

AGENTS = ("--agents", "tests.scale.rate_limited_agents:agents")
RUN_QUEUE = "helix-runs:poll=0.02,worker_concurrency=8"
"""Each worker takes at most 8 runs at a time: the queued load is shared by all three from the start."""
DEFAULT_MODE: str = ProviderRateLimit.model_fields["mode"].default
"""The ``mode`` a limit has when its spec names none."""


@dataclass(frozen=True)
class LoadFigures:
    """What one load measured."""

    runs: int
    limit: int | None
    """``N`` (requests per second) of the deployment's limit; ``None``: no limit configured."""
    completed: int
    failed: int
    requests: int
    rejected: int
    """Requests the provider answered ``429``."""
    max_per_second: int
    """The most requests the provider saw in any one-second window (sliding, its own clock)."""
    throughput: float
    """Requests per second: ``requests / (last - first + 1 s)`` (exactly ``N`` at a full quota)."""
    steady_throughput: float
    """Requests per second over the steady middle of the load: the requests between the one at 20 %
    and the one at 80 % of the arrivals, over the time between them (no start-up, no tail)."""
    admission_wait_p50_ms: float | None
    admission_wait_p95_ms: float | None
    seconds: float


def max_in_window(times: list[float], window: float = 1.0) -> int:
    """The most timestamps in any half-open window ``[t, t + window)``."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + window) - i for i, t in enumerate(ordered)), default=0)


def steady_rate(times: list[float], first: float = 0.2, last: float = 0.8) -> float:
    """Arrivals per second between the arrival at fraction ``first`` and the one at ``last`` of them."""
    ordered = sorted(times)
    lo, hi = int(first * (len(ordered) - 1)), int(last * (len(ordered) - 1))
    span = ordered[hi] - ordered[lo] if hi > lo else 0.0
    return (hi - lo) / span if span > 0 else 0.0


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def admission_waits_ms(database_url: str) -> list[float]:
    """Enqueued -> dequeued of every admission workflow, from DBOS's own rows (milliseconds)."""
    engine = sa.create_engine(to_sqlalchemy_url(dbos_system_database_url(database_url)))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT started_at_epoch_ms - created_at FROM dbos.workflow_status "
                    "WHERE name = :name AND started_at_epoch_ms IS NOT NULL"
                ),
                {"name": ADMISSION_WORKFLOW_NAME},
            ).all()
    finally:
        engine.dispose()
    return [float(r[0]) for r in rows]


def run_load(
    database_url: str,
    workdir: Path,
    *,
    runs: int,
    limit: int | None,
    workers: int = 3,
    provider_quota: int | None = None,
    mode: str | None = None,
) -> tuple[LoadFigures, Deployment, list[str]]:
    """Start ``runs`` runs over HTTP on a fresh deployment and wait for all; the caller closes it.

    ``limit``: the deployment's ``--rate-limit openai/:requests=N/1`` (``None``: none). The
    provider answers ``429`` above ``provider_quota`` requests per second (default: ``limit``).
    ``mode``: the limit's ``mode`` (``None``: the spec names none, so the default applies).
    """
    quota = provider_quota if provider_quota is not None else limit
    server = ScriptedOpenAIServer(handler=lambda body: {"text": "ok"}, rate_limit_per_second=quota)
    server.start()
    spec = f"openai/:requests={limit}/1" + (f",mode={mode}" if mode else "")
    extra = ("--rate-limit", spec) if limit is not None else ()
    deployment = Deployment(
        database_url,
        workdir,
        queue=RUN_QUEUE,
        workers=workers,
        step_seconds=0,
        agents=AGENTS,
        extra_args=extra,
        extra_env={"HELIX_RATE_TEST_API_BASE": server.base_url, **_warm_up_gate(database_url, limit, mode)},
        # a worker starved by a loaded machine must not look dead: a takeover would send its calls again
        takeover_after=30.0,
    )
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            sessions = list(pool.map(lambda i: deployment.start_run(f"run {i}", agent="caller"), range(runs)))
        statuses = _wait_finished(deployment, sessions, timeout=60 + 3 * runs)
        seconds = time.monotonic() - started
        arrivals = [t for t, body in zip(server.arrival_times, server.requests, strict=True) if not _warm_up(body)]
        span = (max(arrivals) - min(arrivals)) if arrivals else 0.0
        waits = admission_waits_ms(database_url) if limit is not None else []
        figures = LoadFigures(
            runs=runs,
            limit=limit,
            completed=sum(1 for s in statuses.values() if s == "completed"),
            failed=sum(1 for s in statuses.values() if s != "completed"),
            requests=len(arrivals),
            rejected=server.rejected_count,
            max_per_second=max_in_window(arrivals),
            throughput=len(arrivals) / (span + 1.0) if arrivals else 0.0,
            steady_throughput=steady_rate(arrivals),
            admission_wait_p50_ms=_pct(waits, 0.5),
            admission_wait_p95_ms=_pct(waits, 0.95),
            seconds=seconds,
        )
    except BaseException:
        deployment.close()
        raise
    finally:
        server.stop()
    return figures, deployment, sessions


def _warm_up_gate(database_url: str, limit: int | None, mode: str | None) -> dict[str, str]:
    """Workers warm up through the exact gate (the provider counts warm-ups against its quota too)."""
    if limit is None or (mode or DEFAULT_MODE) != "exact":
        return {}
    return {"HELIX_RATE_TEST_GATE": f"{limit},{database_url}"}


def _warm_up(body: dict[str, object]) -> bool:
    messages = body.get("messages")
    return isinstance(messages, list) and bool(messages) and WARM_UP in json.dumps(messages[-1])


def _wait_finished(deployment: Deployment, sessions: list[str], timeout: float) -> dict[str, str]:
    """Every session's status once none is active (a failed run counts as finished)."""
    deadline = time.monotonic() + timeout
    statuses: dict[str, str] = {}
    left = list(sessions)
    while left:
        for session_id in list(left):
            status = str(deployment.session(session_id)["status"])
            if status not in ("active", "running", "pending"):
                statuses[session_id] = status
                left.remove(session_id)
        if left and time.monotonic() > deadline:
            raise AssertionError(
                f"{len(left)} runs not finished, e.g. {deployment.session(left[0])}\n{deployment.logs()}"
            )
        if left:
            time.sleep(0.2)
    return statuses
