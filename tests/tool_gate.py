"""A tool a test can hold mid-execution across processes: it records each execution, then waits for a gate file.

The agents of a served process (``tests/remote``, ``tests/a2a_protocol``) run their tool in another
process than the test, so the test and the tool meet in a shared directory: the tool appends its
process id to ``dig-entries`` and waits until ``gate`` exists; the test reads the entries (did it
start, how often did it run) and opens the gate.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from helix_dbos import ToolContext

GATE_SECONDS = 60.0
"""The longest a tool waits for its gate: a test that never opens it still ends."""


def record_and_wait(directory: Path, ctx: ToolContext | None = None) -> None:
    """Record this execution, then wait for the gate (at most :data:`GATE_SECONDS`; with ``ctx``, or an abort)."""
    with (directory / "dig-entries").open("a") as out:
        out.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + GATE_SECONDS
    while not (directory / "gate").exists() and time.monotonic() < deadline:
        if ctx is not None and ctx.abort_signal.aborted:
            return
        time.sleep(0.05)


@dataclass
class ToolGate:
    """The test's side of :func:`record_and_wait`."""

    shared: Path
    """The directory the served tool records in and waits on."""

    def open_gate(self) -> None:
        (self.shared / "gate").touch()

    def dig_entries(self) -> list[str]:
        path = self.shared / "dig-entries"
        return path.read_text().split() if path.exists() else []
