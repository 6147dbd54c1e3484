"""A PostgreSQL server for the tests: ``$HELIX_TEST_DATABASE_URL``, or a throw-away local cluster.

The throw-away cluster is initdb'd into a temporary directory from the server binaries
(``/usr/lib/postgresql/*/bin`` or ``PATH``), listens on a free port on 127.0.0.1 with trust auth,
and trades durability for speed (``fsync=off``): it exists for one test session and is removed at
exit. ``initdb`` and ``pg_ctl`` refuse to run as root, so as root they run as the ``postgres`` OS
user through ``runuser``.

Every test that needs a database of its own asks :func:`create_database` for one: databases are
cheap, and a fresh one isolates a test completely. Fault tests start a cluster of their own
(``start_local_cluster(crash_safe=True)``) and crash it (:meth:`LocalCluster.crash`, ``pg_ctl stop -m
immediate``) and start it again on the same port (:meth:`LocalCluster.start`, or both with
:meth:`LocalCluster.outage`).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

ENV_URL = "HELIX_TEST_DATABASE_URL"
_SERVER_OPTIONS = (
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
    "-c shared_buffers=32MB -c log_min_messages=warning"
)


def find_pg_bin_dir() -> Path | None:
    """Return the directory holding ``initdb`` and ``pg_ctl`` (newest version first), or ``None``."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for directory in candidates:
        if os.access(os.path.join(directory, "initdb"), os.X_OK) and os.access(
            os.path.join(directory, "pg_ctl"), os.X_OK
        ):
            return Path(directory)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).parent
    return None


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit()) or (0,)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalCluster:
    """A running throw-away PostgreSQL cluster; :meth:`stop` shuts it down and deletes it."""

    bin_dir: Path
    root: Path
    port: int
    run_as: list[str] = field(default_factory=list)
    stopped: bool = False
    extra_options: str = ""
    """Server options added after the defaults (a later ``-c`` wins)."""

    @property
    def url(self) -> str:
        """URL of the ``postgres`` maintenance database (superuser ``postgres``, no password)."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory."""
        return self.root / "data"

    def stop(self) -> None:
        """Stop the server (immediate mode: nothing in it is worth a checkpoint) and remove it."""
        if self.stopped:
            return
        self.stopped = True
        with contextlib.suppress(Exception):
            self._pg_ctl("-m", "immediate", "stop", timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)

    def crash(self) -> None:
        """Kill the server as a crash would (``pg_ctl stop -m immediate``), keeping its data.

        Every client connection drops at once ("server closed the connection unexpectedly") and new
        ones are refused until :meth:`start`; the next start runs crash recovery.
        """
        result = self._pg_ctl("-m", "immediate", "stop", timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl stop failed: {result.stdout}{result.stderr}")

    def start(self) -> None:
        """Start the server again on the same port (after :meth:`crash`); waits until it accepts connections."""
        result = self._start_on(self.port)
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {result.stdout}{result.stderr}{_tail(self.root / 'server.log')}")

    def outage(self, seconds: float) -> threading.Thread:
        """Crash the server now and start it again ``seconds`` later, from a background thread.

        Returns the started thread; join it to know the server is back.
        """
        self.crash()

        def _restart() -> None:
            time.sleep(seconds)
            self.start()

        thread = threading.Thread(target=_restart, name="pg-outage", daemon=True)
        thread.start()
        return thread

    def _start_on(self, port: int) -> subprocess.CompletedProcess[str]:
        options = f"-p {port} -k {self.root} -c listen_addresses=127.0.0.1 {_SERVER_OPTIONS} {self.extra_options}"
        return self._pg_ctl("-l", str(self.root / "server.log"), "-o", options, "-w", "-t", "60", "start", timeout=120)

    def _pg_ctl(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.run_as, str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def start_local_cluster(*, crash_safe: bool = False) -> LocalCluster:
    """Initialise and start a throw-away cluster; raises ``RuntimeError`` when that is impossible.

    ``crash_safe`` turns ``synchronous_commit`` back on, for tests that crash the server
    (:meth:`LocalCluster.crash`): without it a commit the client saw succeed can be lost in the
    crash, which no application could survive. (``fsync`` stays off: the operating system, and so
    its page cache, survives a server crash.)
    """
    bin_dir = find_pg_bin_dir()
    if bin_dir is None:
        raise RuntimeError(
            "No PostgreSQL server binaries found (initdb, pg_ctl): install postgresql, "
            f"or set {ENV_URL} to a server the tests may create databases on"
        )
    root = Path(tempfile.mkdtemp(prefix="helix-pg-"))
    run_as: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    cluster = LocalCluster(
        bin_dir=bin_dir,
        root=root,
        port=0,
        run_as=run_as,
        extra_options="-c synchronous_commit=on" if crash_safe else "",
    )
    try:
        subprocess.run(
            [
                *run_as,
                str(bin_dir / "initdb"),
                "-D",
                str(cluster.data_dir),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        last_error = ""
        for _attempt in range(5):  # the free port may be taken between probing and binding
            cluster.port = _free_port()
            result = cluster._start_on(cluster.port)
            if result.returncode == 0:
                atexit.register(cluster.stop)
                return cluster
            last_error = result.stdout + result.stderr + _tail(root / "server.log")
        raise RuntimeError(f"pg_ctl start failed: {last_error}")
    except BaseException:
        cluster.stop()
        raise


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def unique_name(prefix: str) -> str:
    """A database name that no other test (or concurrent test run) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def _admin_engine(base_url: str) -> sa.Engine:
    return sa.create_engine(_with_psycopg(base_url), isolation_level="AUTOCOMMIT", poolclass=NullPool)


def _with_psycopg(url: str) -> str:
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def create_database(base_url: str, name: str) -> str:
    """Create database ``name`` on the server of ``base_url`` and return its URL."""
    engine = _admin_engine(base_url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    finally:
        engine.dispose()
    return make_url(_with_psycopg(base_url)).set(database=name).render_as_string(hide_password=False)


def create_database_from_template(base_url: str, name: str, template: str) -> str:
    """Create database ``name`` as a copy of database ``template`` and return its URL.

    PostgreSQL copies the template's files (no SQL replayed), so a copy of a migrated database is
    ready in a fraction of the time the migrations take. Nobody may be connected to the template
    while it is copied: connections left to it are ended first.
    """
    engine = _admin_engine(base_url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (template,),
            )
            conn.exec_driver_sql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        engine.dispose()
    return make_url(_with_psycopg(base_url)).set(database=name).render_as_string(hide_password=False)


def drop_database(base_url: str, name: str) -> None:
    """Drop database ``name``, disconnecting anyone still connected (PostgreSQL 13+)."""
    engine = _admin_engine(base_url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        engine.dispose()
