"""``scripts/_bench_threads.py``: client CPU summed by thread kind, ended threads included when seen.

Real threads burning real CPU, read back from ``/proc`` (Linux): the figures ``bench_capacity.py
--threads`` prints depend on a thread's CPU landing under its kind, and on a thread that ends
mid-span (the benchmark's client threads) still counting when a checkpoint saw it.
"""

from __future__ import annotations

import resource
import threading
import time
from pathlib import Path

import pytest

from scripts._bench_threads import ENDED, ThreadCpu, kind_of

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("dbos-executor-_12", "dbos-executor"),  # ThreadPoolExecutor(thread_name_prefix="dbos-executor-")
        ("Thread-3 (run_notifier)", "run_notifier"),
        ("ThreadPoolExecutor-0_3", "ThreadPoolExecutor"),
        ("asyncio_0", "asyncio"),
        ("helix-dbos-loop", "helix-dbos-loop"),
        ("MainThread", "MainThread"),
    ],
)
def test_a_thread_kind_is_its_name_without_its_number(name: str, kind: str) -> None:
    assert kind_of(name) == kind


def _burn(seconds: float) -> None:
    ends = time.thread_time() + seconds
    while time.thread_time() < ends:
        pass


def _process_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def test_cpu_lands_under_the_kind_of_the_thread_that_spent_it_even_after_it_ended() -> None:
    cpu = ThreadCpu()
    process_before = _process_seconds()
    cpu.start()
    seen = [threading.Thread(target=_burn, args=(0.3,), name=f"burner-{i}") for i in range(2)]
    for thread in seen:
        thread.start()
    for thread in seen:
        thread.join()  # ended before any checkpoint: /proc forgot them
    burned, release = threading.Event(), threading.Event()

    def burn_then_wait() -> None:
        _burn(0.3)
        burned.set()
        release.wait(10)

    kept = threading.Thread(target=burn_then_wait, name="kept-3")
    kept.start()
    assert burned.wait(10)
    cpu.checkpoint()  # the thread is still alive here, its CPU read
    release.set()
    kept.join()
    spent = cpu.stop(_process_seconds() - process_before)

    assert spent.get("kept", 0.0) >= 0.2, spent  # ended after the checkpoint: still counted
    assert "burner" not in spent, spent  # ended unseen: only in the remainder
    assert spent.get(ENDED, 0.0) >= 0.4, spent
