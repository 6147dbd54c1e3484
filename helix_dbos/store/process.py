"""Which operating-system process this is, and whether another one is still alive.

An executor id may be held by one live process at a time (:mod:`helix_dbos.runtime.identity`); the
worker row that holds it names its process by host name, pid and a *process token*. A pid alone is
not enough: a process killed with SIGKILL may have its pid reused (in a container restarted under
the same host name, the new process is often pid 1 again, like the one that died), and a killed
child that its parent has not reaped yet still has a ``/proc`` entry. On Linux the token is the
machine's boot id and the process's start time in clock ticks (``/proc/<pid>/stat`` field 22),
which together name one process for the life of the machine; elsewhere it is ``None`` and the pid
is all there is.

Liveness is only knowable for processes on this machine; for another machine the caller falls back
to the age of the holder's heartbeat.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class ProcessState(Enum):
    """What this machine can tell about a process it is asked about."""

    ALIVE = "alive"
    DEAD = "dead"  # gone, a zombie, or a different process under a reused pid


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` split after the command name (which may hold spaces and parentheses)."""
    text = _read(Path(f"/proc/{pid}/stat"))
    if text is None or ")" not in text:
        return None
    return text.rsplit(")", 1)[1].split()


def process_token(pid: int) -> str | None:
    """``"<boot id>:<start time>"`` of process ``pid`` on this machine, ``None`` where unknowable."""
    boot = _read(_BOOT_ID)
    fields = _stat_fields(pid)
    if boot is None or fields is None or len(fields) < 20:
        return None
    return f"{boot.strip()}:{fields[19]}"  # field 22 of stat; fields[0] here is field 3 (the state)


def process_state(pid: int, token: str | None) -> ProcessState:
    """Whether process ``pid`` (whose token was ``token``, ``None``: unknown) still runs on this machine."""
    if pid <= 0:
        return ProcessState.DEAD
    fields = _stat_fields(pid)
    if fields is not None:
        if fields[0] in ("Z", "X"):  # killed, not reaped yet: it runs nothing
            return ProcessState.DEAD
        if token is not None and process_token(pid) != token:
            return ProcessState.DEAD  # the pid now belongs to another process
        return ProcessState.ALIVE
    if Path("/proc/self/stat").exists():
        return ProcessState.DEAD  # this machine has /proc, and no entry for the pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ProcessState.DEAD
    except PermissionError:
        return ProcessState.ALIVE  # it exists, under another user
    return ProcessState.ALIVE


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as a worker row names it."""

    hostname: str
    pid: int
    token: str | None

    @classmethod
    def current(cls) -> ProcessIdentity:
        """The process running this code."""
        pid = os.getpid()
        return cls(hostname=socket.gethostname(), pid=pid, token=process_token(pid))


__all__ = ["ProcessIdentity", "ProcessState", "process_state", "process_token"]
