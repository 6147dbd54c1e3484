"""A PostgreSQL crash in the middle of many runs: every run completes and every stream is whole.

The scenario of issue 9 items 1 and 2, on real parts: one process, one DBOS, a cluster of the
module's own crashed with ``pg_ctl stop -m immediate`` while runs are in flight and started again a
few seconds later on the same port. Each run is four model calls around three tool calls, with
text streamed; a live reader follows every session's stream.

What must hold afterwards (nothing here is lenient about "most"):

- every run ``completed`` (no ``OperationalError`` recorded as a step output, no ``helix.fail_run``);
- every stream is ``ended`` and holds exactly the chunks of a run that saw no outage, with
  contiguous sequences (no chunk dropped, none doubled);
- every live reader got all those chunks in order and then its end, never an error or a hang.

The default test is bounded (a 4 s outage, 40 runs, well under a minute). ``-m chaos`` adds the
longer variants: more runs and several outages in a row.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from helix_dbos.runtime.aio import background_loop
from tests import pg
from tests.durability.harness import EFFECTS, TOOLS_PER_RUN, Env, Readers, agent, launched

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def env(crash_cluster: pg.LocalCluster) -> Iterator[Env]:
    with launched(crash_cluster) as env:
        yield env


def _baseline(env: Env) -> list[str]:
    """The chunk types of one run that saw no outage (every run of the test must match it)."""
    EFFECTS.max_delay = 0.0
    handle = env.executor.execute(agent, "baseline")
    assert handle.result(timeout_seconds=60).status == "completed"
    # A run's result can land before the flusher has committed its last chunks (a batch window, a
    # loaded machine): read the stream once it has ended, as the runs' live readers do.
    deadline = time.monotonic() + 30
    while _stored(env, handle.session_id)[0] != "ended" and time.monotonic() < deadline:
        time.sleep(0.05)
    records = background_loop.run(env.manager.read_records(handle.session_id))
    return [r.chunk.type for r in records]


def _stored(env: Env, session_id: str) -> tuple[str, list[int], list[str]]:
    info = background_loop.run(env.manager.get_stream_info(session_id))
    records = background_loop.run(env.manager.read_records(session_id))
    status = info.status if info is not None else "missing"
    return status, [r.sequence for r in records], [r.chunk.type for r in records]


def run_outage_trial(
    env: Env, *, runs: int, outages: list[tuple[float, float]], max_tool_delay: float
) -> dict[str, Any]:
    """Start ``runs`` runs, crash the database per ``outages`` ((start offset, seconds)), check everything."""
    expected = _baseline(env)
    EFFECTS.max_delay = max_tool_delay
    readers = Readers(env.executor)
    handles = []
    try:
        for n in range(runs):
            handle = env.executor.execute(agent, f"run {n}")
            readers.follow(handle.session_id)
            handles.append(handle)
        started = time.monotonic()
        for offset, seconds in outages:
            time.sleep(max(0.0, started + offset - time.monotonic()))
            env.cluster.outage(seconds).join()
        results = {h.session_id: h.result(timeout_seconds=120) for h in handles}
        readers.wait(30)
    finally:
        readers.close()

    problems: list[str] = []
    for session_id, result in results.items():
        if result.status != "completed":
            problems.append(f"{session_id}: run {result.status}: {str(result.error)[:300]}")
        status, sequences, types = _stored(env, session_id)
        if status != "ended":
            problems.append(f"{session_id}: stream {status} after its run ended")
        if types != expected or sequences != list(range(1, len(expected) + 1)):
            problems.append(f"{session_id}: stored chunks {len(types)}/{len(expected)}: {types} @ {sequences}")
        read = readers.results[session_id]
        if read.end != "end" or read.types != expected:
            problems.append(f"{session_id}: reader {read.end!r} after {len(read.types)}/{len(expected)} chunks")
        for i in range(TOOLS_PER_RUN):
            if EFFECTS.counts.get((session_id, i)) != 1:
                problems.append(f"{session_id}: tool call {i} ran {EFFECTS.counts.get((session_id, i))} times")
    deadline = time.monotonic() + 10
    while not env.manager.listening and time.monotonic() < deadline:
        time.sleep(0.05)
    if not env.manager.listening:
        problems.append("the stream manager's LISTEN connection did not come back")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])
    return {"runs": runs, "completed": sum(r.status == "completed" for r in results.values()), "chunks": len(expected)}


def test_runs_and_streams_survive_a_database_crash(env: Env) -> None:
    figures = run_outage_trial(env, runs=40, outages=[(1.0, 4.0)], max_tool_delay=1.5)
    assert figures["completed"] == 40


@pytest.mark.chaos
@pytest.mark.timeout(900)
@pytest.mark.parametrize("trial", range(5))
def test_many_runs_survive_repeated_database_crashes(env: Env, trial: int) -> None:
    figures = run_outage_trial(env, runs=100, outages=[(1.0, 5.0), (9.0, 3.0), (15.0, 4.0)], max_tool_delay=2.5)
    print(f"trial {trial}: {figures}")
