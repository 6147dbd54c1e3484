"""Which operating-system process this is, and whether another one is still alive.

An executor id may be held by one live process at a time (:mod:`helix_dbos.runtime.identity`); the
worker row that holds it names its process by host name, pid and a *process token*. A pid alone is
not enough: a process killed with SIGKILL may have its pid reused (in a container restarted under
the same host name, the new process is often pid 1 again, like the one that died), and a killed
child that its parent has not reaped yet still has a ``/proc`` entry. On Linux the token is the
machine's boot id, the pid namespace and the process's start time in clock ticks
(``/proc/<pid>/stat`` field 22), which together name one process for the life of the machine;
elsewhere it is ``None``.

Liveness is only knowable for processes this process can see (same machine, same pid namespace,
a token to compare); for any other, the caller falls back to the age of the holder's heartbeat.
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
    UNKNOWN = "unknown"  # another machine or process namespace: its heartbeat must tell


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


def machine_key() -> str | None:
    """``"<boot id>/<pid namespace>"``: processes whose pids this process can check, ``None`` where unknowable.

    Two containers can share a host name (``--network host``) but not their pids: the pid namespace
    tells them apart, and the boot id tells a machine from another one of the same name.
    """
    boot = _read(_BOOT_ID)
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return None if boot is None else f"{boot.strip()}/{namespace}"


def process_token(pid: int) -> str | None:
    """``"<machine key>:<start time>"`` of process ``pid`` as seen from here, ``None`` where unknowable."""
    key = machine_key()
    fields = _stat_fields(pid)
    if key is None or fields is None or len(fields) < 20:
        return None
    return f"{key}:{fields[19]}"  # field 22 of stat; fields[0] here is field 3 (the state)


def process_state(pid: int, token: str | None) -> ProcessState:
    """Whether process ``pid`` (whose token was ``token``, ``None``: unknown) still runs.

    :attr:`ProcessState.UNKNOWN` when the token names another machine or process namespace, or
    when nothing here can tell (no token and no ``/proc``): the caller then asks the heartbeat.
    """
    if pid <= 0:
        return ProcessState.DEAD
    key = machine_key()
    if token is not None and (key is None or token.rsplit(":", 1)[0] != key):
        return ProcessState.UNKNOWN
    fields = _stat_fields(pid)
    if fields is not None:
        if fields[0] in ("Z", "X"):  # killed, not reaped yet: it runs nothing
            return ProcessState.DEAD
        if token is not None and process_token(pid) != token:
            return ProcessState.DEAD  # the pid now belongs to another process
        return ProcessState.ALIVE if token is not None else ProcessState.UNKNOWN
    try:  # no /proc entry: gone, or hidden from this user (hidepid)
        os.kill(pid, 0)
    except ProcessLookupError:
        return ProcessState.DEAD
    except PermissionError:
        return ProcessState.ALIVE if token is not None else ProcessState.UNKNOWN
    return ProcessState.ALIVE if token is not None else ProcessState.UNKNOWN


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


__all__ = ["ProcessIdentity", "ProcessState", "machine_key", "process_state", "process_token"]
