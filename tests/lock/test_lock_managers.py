"""The seeds' lock manager contract, on the in-memory manager and on PostgreSQL (two real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helix_dbos.errors import FencingTokenMismatchError, LockLostError, LockNotAcquiredError
from helix_dbos.lock import (
    AcquireOptions,
    InMemoryLockManager,
    LockManager,
    LockManagerBase,
    NoOpLockManager,
    PostgresLockManager,
)
from helix_dbos.store.migrate import upgrade

BACKENDS = [pytest.param("memory", id="memory"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module")
def lock_db_url(pg_server_url: str) -> Iterator[str]:
    import tests.pg as pg

    name = pg.unique_name("helix_locks")
    url = pg.create_database(pg_server_url, name)
    upgrade(url)
    yield url
    pg.drop_database(pg_server_url, name)


@pytest.fixture(params=BACKENDS)
def managers(request: pytest.FixtureRequest) -> Iterator[tuple[LockManagerBase, LockManagerBase]]:
    """Two managers with different holders over the same lock table (as two processes would be)."""
    if request.param == "memory":
        first = InMemoryLockManager("a")
        yield first, InMemoryLockManager("b", shared=first)
        return
    url = request.getfixturevalue("lock_db_url")
    a, b = PostgresLockManager(url, holder_id="a"), PostgresLockManager(url, holder_id="b")
    yield a, b
    a.close()
    b.close()


def _resource(request: pytest.FixtureRequest) -> str:
    return f"res-{request.node.name}-{time.monotonic_ns()}"


def test_the_managers_implement_the_protocol() -> None:
    assert isinstance(NoOpLockManager(), LockManager)
    assert isinstance(InMemoryLockManager(), LockManager)


def test_one_holder_at_a_time_and_tokens_grow(managers, request) -> None:  # type: ignore[no-untyped-def]
    a, b = managers
    res = _resource(request)
    first = a.acquire(res, AcquireOptions(ttl_ms=10_000))
    assert first.acquired and first.lock is not None and first.lock.holder_id == "a"
    refused = b.acquire(res, AcquireOptions(ttl_ms=10_000))
    assert not refused.acquired and refused.lock is None and refused.held_by == "a"
    assert a.release(first.lock) is True
    assert a.release(first.lock) is False  # released once
    second = b.acquire(res, AcquireOptions(ttl_ms=10_000))
    assert second.acquired and second.lock is not None
    assert second.lock.fencing_token > first.lock.fencing_token
    assert second.lock.expires_at - second.lock.acquired_at == 10_000


def test_a_lock_lasts_exactly_its_ttl(managers, request) -> None:  # type: ignore[no-untyped-def]
    """``expires_at`` is ``acquired_at + ttl_ms`` to the millisecond: one clock read, not two that
    can straddle a millisecond (which made the last line of the test above fail now and then)."""
    a, _ = managers
    res = _resource(request)
    spans = set()
    for _ in range(400):
        got = a.acquire(res, AcquireOptions(ttl_ms=7))
        assert got.acquired and got.lock is not None
        spans.add(got.lock.expires_at - got.lock.acquired_at)
        a.release(got.lock)
    assert spans == {7}


def test_a_lock_expires_by_ttl_and_the_old_holder_is_fenced(managers, request) -> None:  # type: ignore[no-untyped-def]
    a, b = managers
    res = _resource(request)
    old = a.acquire(res, AcquireOptions(ttl_ms=150)).lock
    assert old is not None
    a.check_fencing_token(old)  # still the holder
    time.sleep(0.25)
    new = b.acquire(res, AcquireOptions(ttl_ms=10_000)).lock
    assert new is not None and new.fencing_token > old.fencing_token
    assert a.extend(old, 10_000) is None  # lost: cannot be revived
    assert a.release(old) is False and b.current_token(res) == new.fencing_token  # did not free b's lock
    with pytest.raises(FencingTokenMismatchError) as raised:
        a.check_fencing_token(old)
    assert (raised.value.session_id, raised.value.expected_token, raised.value.actual_token) == (
        res,
        old.fencing_token,
        new.fencing_token,
    )


def test_extend_keeps_the_lock_past_its_ttl(managers, request) -> None:  # type: ignore[no-untyped-def]
    a, b = managers
    res = _resource(request)
    # TTLs of seconds, not of a few hundred ms: a loaded machine (3 test workers and PostgreSQL
    # on 2 cores) took longer than a 300 ms TTL between the acquire and the extend.
    lock = a.acquire(res, AcquireOptions(ttl_ms=1_500)).lock
    assert lock is not None
    time.sleep(0.3)
    extended = a.extend(lock, 4_000)
    assert extended is not None and extended.expires_at > lock.expires_at
    assert extended.fencing_token == lock.fencing_token
    time.sleep(max(0.0, (lock.expires_at - time.time() * 1000) / 1000) + 0.2)  # past the first TTL
    assert not b.acquire(res, AcquireOptions(ttl_ms=1_000)).acquired


def test_wait_takes_the_lock_when_it_is_released_and_gives_up_at_the_timeout(managers, request) -> None:  # type: ignore[no-untyped-def]
    a, b = managers
    res = _resource(request)
    lock = a.acquire(res, AcquireOptions(ttl_ms=10_000)).lock
    assert lock is not None
    started = time.monotonic()
    assert not b.acquire(res, AcquireOptions(ttl_ms=1_000, wait=True, wait_timeout_ms=200)).acquired
    assert 0.19 < time.monotonic() - started < 2
    threading.Timer(0.2, a.release, args=(lock,)).start()
    waited = b.acquire(res, AcquireOptions(ttl_ms=1_000, wait=True, wait_timeout_ms=5_000))
    assert waited.acquired and waited.lock is not None and waited.lock.holder_id == "b"


def test_with_lock_heartbeats_past_the_ttl_and_releases(managers, request) -> None:  # type: ignore[no-untyped-def]
    a, b = managers
    res = _resource(request)

    def work(lock):  # type: ignore[no-untyped-def]
        time.sleep(0.5)  # longer than the TTL: the heartbeat keeps it
        assert not b.acquire(res, AcquireOptions(ttl_ms=1_000)).acquired
        return lock.fencing_token

    token = a.with_lock(res, work, ttl_ms=200, heartbeat_ms=50)
    assert isinstance(token, int)
    assert b.current_token(res) is None  # released
    held = b.acquire(res, AcquireOptions(ttl_ms=10_000)).lock
    assert held is not None
    with pytest.raises(LockNotAcquiredError) as raised:
        a.with_lock(res, lambda lock: None, ttl_ms=1_000, wait_timeout_ms=100)
    assert (raised.value.resource, raised.value.held_by) == (res, "b")


def test_with_lock_raises_lock_lost_when_the_lock_was_taken(managers, request) -> None:  # type: ignore[no-untyped-def]
    a, b = managers
    res = _resource(request)
    ran: list[bool] = []

    def work(lock):  # type: ignore[no-untyped-def]
        time.sleep(0.3)  # no heartbeat within the TTL: the lock expires and b takes it
        assert b.acquire(res, AcquireOptions(ttl_ms=10_000)).acquired
        time.sleep(0.15)  # the next heartbeat finds it lost
        ran.append(True)

    with pytest.raises(LockLostError) as raised:
        a.with_lock(res, work, ttl_ms=100, heartbeat_ms=400)
    assert ran == [True] and raised.value.resource == res
    assert b.current_token(res) is not None  # a did not release b's lock


def test_noop_manager_always_succeeds() -> None:
    noop = NoOpLockManager()
    one = noop.acquire("r", AcquireOptions(ttl_ms=10)).lock
    two = noop.acquire("r", AcquireOptions(ttl_ms=10)).lock
    assert one is not None and two is not None and two.fencing_token > one.fencing_token
    assert noop.release(one) and noop.extend(one, 5) is not None
    assert noop.with_lock("r", lambda lock: 7, ttl_ms=10) == 7


def test_acquire_options_are_validated() -> None:
    with pytest.raises(ValueError):
        AcquireOptions(ttl_ms=0)
    with pytest.raises(ValueError):
        AcquireOptions(ttl_ms=10, wait_timeout_ms=-1)


def test_postgres_needs_postgresql(tmp_path: Path) -> None:
    from helix_dbos.errors import HelixError

    with pytest.raises(HelixError, match="PostgreSQL"):
        PostgresLockManager(f"sqlite:///{tmp_path / 'x.sqlite'}")


_WORKER = textwrap.dedent(
    """
    import sys, time
    from helix_dbos.lock import PostgresLockManager
    url, resource, counter, holder, rounds = sys.argv[1:6]
    manager = PostgresLockManager(url, holder_id=holder)
    def critical(lock):
        value = int(open(counter).read())  # read, pause, write: loses updates without exclusion
        time.sleep(0.01)
        open(counter, "w").write(str(value + 1))
        with open(counter + ".log", "a") as log:
            log.write(f"{lock.fencing_token}\\n")
    for _ in range(int(rounds)):
        manager.with_lock(resource, critical, ttl_ms=5_000, wait_timeout_ms=30_000)
    manager.close()
    """
)


@pytest.mark.postgres
def test_two_processes_contending_never_overlap(lock_db_url: str, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    rounds = 25
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, lock_db_url, "shared", str(counter), holder, str(rounds)],
            env={**os.environ},
        )
        for holder in ("p1", "p2")
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    assert int(counter.read_text()) == 2 * rounds  # no lost update
    tokens = [int(line) for line in (tmp_path / "counter.log").read_text().split()]
    assert tokens == sorted(tokens) and len(set(tokens)) == 2 * rounds  # later holders, larger tokens


_HOLD = textwrap.dedent(
    """
    import sys, time
    from helix_dbos.lock import AcquireOptions, PostgresLockManager
    manager = PostgresLockManager(sys.argv[1], holder_id="doomed")
    assert manager.acquire(sys.argv[2], AcquireOptions(ttl_ms=int(sys.argv[3]))).acquired
    print("held", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.postgres
def test_a_killed_holder_keeps_the_lock_until_its_ttl_not_its_connection(lock_db_url: str) -> None:
    ttl_ms = 1_500
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, lock_db_url, "killed", str(ttl_ms)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    killed_at = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    other = PostgresLockManager(lock_db_url, holder_id="survivor")
    try:
        refused = other.acquire("killed", AcquireOptions(ttl_ms=1_000))
        assert not refused.acquired and refused.held_by == "doomed"  # its connection is gone, its lock is not
        taken = other.acquire("killed", AcquireOptions(ttl_ms=1_000, wait=True, wait_timeout_ms=10_000))
        assert taken.acquired
        assert time.monotonic() - killed_at > ttl_ms / 1000 - 0.5
    finally:
        other.close()
