"""Client CPU by thread for ``bench_capacity.py``: which of a process's threads spent its CPU.

A stack's CPU per run says how much a run costs; it does not say whose it is. In one process the
workflow threads share the CPU with threads that run whatever the load: DBOS's queue pollers, its
notifier and background jobs, helix-dbos's event loop, stream flusher and sweeper. This reads each
thread's CPU time from ``/proc/self/task/<tid>`` (Linux) before and after a measured span and sums
it by thread *kind*: a thread's name without its number (``dbos-executor-12`` is ``dbos-executor``;
``Thread-3 (run_notifier)`` is ``run_notifier``).

A thread that ends inside the span takes its CPU with it (``/proc`` forgets it), unless a
:meth:`ThreadCpu.checkpoint` saw it first (the benchmark takes one before its client threads that
started the runs end); what the threads seen do not account for of the process's ``getrusage``
total is reported as ``(ended threads)``.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

__all__ = ["ENDED", "ThreadCpu", "kind_of"]

ENDED = "(ended threads)"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_TARGET = re.compile(r"^Thread-\d+ \((?P<target>.+)\)$")
_NUMBER = re.compile(r"[-_]*\d+(_\d+)?$")


def kind_of(name: str) -> str:
    """A thread's kind: its target for an unnamed ``Thread-N (target)``, else its name without its number."""
    found = _TARGET.match(name)
    if found:
        return found.group("target")
    return _NUMBER.sub("", name).rstrip("-_") or name


def _cpu_by_tid() -> dict[int, float]:
    """Each live thread's CPU seconds so far (empty where ``/proc`` is not there).

    From ``schedstat`` (the scheduler's nanoseconds on a CPU) where the kernel keeps it, else
    ``stat``'s user + system clock ticks: a tick is 10 ms, and the load's ~200 executor threads
    start inside the span, so ticks would undercount them by about half a tick each.
    """
    out: dict[int, float] = {}
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return out
    for entry in tasks.iterdir():
        try:
            out[int(entry.name)] = int((entry / "schedstat").read_text().split()[0]) / 1e9
            continue
        except (OSError, ValueError, IndexError):
            pass
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        out[int(entry.name)] = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    return out


class ThreadCpu:
    """CPU seconds by thread kind between :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self._kinds: dict[int, str] = {}
        self._before: dict[int, float] = {}
        self._last: dict[int, float] = {}

    def _note_names(self) -> None:
        for thread in threading.enumerate():
            if thread.native_id is not None:
                self._kinds[thread.native_id] = kind_of(thread.name)

    def start(self) -> None:
        self._note_names()
        self._before = _cpu_by_tid()
        self._last = {}

    def checkpoint(self) -> None:
        """Remember the live threads' CPU so far: a thread that then ends still counts, up to here."""
        self._note_names()
        self._last.update(_cpu_by_tid())

    def stop(self, process_seconds: float) -> dict[str, float]:
        """Seconds by kind since :meth:`start`; ``process_seconds`` (``getrusage``'s) gives the ended threads'."""
        after = {**self._last, **_cpu_by_tid()}
        self._note_names()
        spent: dict[str, float] = {}
        for tid, seconds in after.items():
            kind = self._kinds.get(tid, "(unnamed)")
            spent[kind] = spent.get(kind, 0.0) + seconds - self._before.get(tid, 0.0)
        ended = process_seconds - sum(spent.values())
        if ended > 0.005:  # below a tick or two is rounding
            spent[ENDED] = ended
        return {kind: seconds for kind, seconds in spent.items() if seconds > 0}
