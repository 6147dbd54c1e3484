"""No two live processes run as one executor id (issue: two demos in one directory ran one run twice).

DBOS recovers an executor id's ``PENDING`` workflows when a process with that id launches. With
every process defaulting to ``local``, a second ``demo`` (or a ``serve`` beside a demo) re-ran the
first one's run in flight while the first was running it: both executed the same steps and the
stream held the first model step's text twice. ``launch()`` now claims an id no live process holds
(:mod:`helix_dbos.runtime.identity`); ``recover`` refuses a live executor's id unless forced.

The rules are tested on rows that name real processes (a ``sleep`` child: alive, a zombie, reaped)
on both stores; the bug itself through two real ``demo`` processes on one database.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from cli_process import CliProcess, cli_env

from helix_dbos.errors import ExecutorIdInUseError
from helix_dbos.runtime.identity import claim_executor_id, holder_state, refuse_live_executors
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.base import WorkerRecord
from helix_dbos.store.process import ProcessIdentity, ProcessState, process_state, process_token
from helix_dbos.store.schema import stream_chunks, workers

APP = "helix-dbos-1"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """Another live process on this machine."""
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def _hold(store: SqlSessionStore, executor_id: str, pid: int, *, hostname: str | None = None, age_ms: int = 0) -> None:
    """Write the row a process ``pid`` holding ``executor_id`` would have written."""
    now = int(time.time() * 1000)
    with store.engine.begin() as conn:
        conn.execute(sa.delete(workers).where(workers.c.executor_id == executor_id))
        conn.execute(
            workers.insert().values(
                executor_id=executor_id,
                app_version=APP,
                hostname=hostname or socket.gethostname(),
                pid=pid,
                process_token=process_token(pid) if hostname is None else "elsewhere",
                started_at=now - age_ms,
                heartbeat_at=now - age_ms,
            )
        )


def _row(store: SqlSessionStore, executor_id: str) -> WorkerRecord:
    return next(w for w in store.workers.list_workers() if w.executor_id == executor_id)


# --- which processes are alive --------------------------------------------------------------------


def test_a_process_is_alive_until_it_dies_and_a_zombie_or_a_reused_pid_is_dead() -> None:
    process = subprocess.Popen(["sleep", "60"])
    token = process_token(process.pid)
    assert token is not None and process_state(process.pid, token) is ProcessState.ALIVE
    reused = token.rsplit(":", 1)[0] + ":1"  # this machine, another start time: the pid, reused
    assert process_state(process.pid, reused) is ProcessState.DEAD
    process.kill()
    time.sleep(0.2)  # killed, not reaped: a zombie still has a /proc entry
    assert Path(f"/proc/{process.pid}/stat").exists()
    assert process_state(process.pid, token) is ProcessState.DEAD
    process.wait()
    assert process_state(process.pid, token) is ProcessState.DEAD
    assert process_state(0, None) is ProcessState.DEAD


def test_holder_state_by_machine_process_and_heartbeat(sleeper: subprocess.Popen[bytes]) -> None:
    me = ProcessIdentity.current()
    now = int(time.time() * 1000)

    def row(**values: object) -> WorkerRecord:
        base: dict[str, object] = {
            "executor_id": "x",
            "app_version": APP,
            "hostname": me.hostname,
            "pid": sleeper.pid,
            "process_token": process_token(sleeper.pid),
            "started_at": now,
            "heartbeat_at": now,
        }
        return WorkerRecord.model_validate({**base, **values})

    def state(r: WorkerRecord) -> str:
        return holder_state(r, me, now=now, live_heartbeat_ms=10_000)

    assert state(row()) == "live"
    assert state(row(heartbeat_at=now - 3_600_000)) == "live"  # on this machine the process decides
    assert state(row(pid=me.pid, process_token=me.token)) == "mine"
    assert state(row(pid=0, process_token=None)) == "free"  # released by a clean shutdown
    assert state(row(hostname="elsewhere", heartbeat_at=now - 500)) == "live"
    assert state(row(hostname="elsewhere", heartbeat_at=now - 60_000)) == "free"


# --- claiming an id, on both stores ---------------------------------------------------------------


def test_a_process_given_no_id_takes_the_first_one_no_live_process_holds(
    store: SqlSessionStore, sleeper: subprocess.Popen[bytes]
) -> None:
    _hold(store, "local", sleeper.pid)
    assert claim_executor_id(store.workers, app_version=APP) == "local-2"
    assert _row(store, "local-2").pid == ProcessIdentity.current().pid
    assert _row(store, "local").pid == sleeper.pid  # the live holder's row is untouched
    # Launched again in the same process (a test, a notebook): its own id again.
    assert claim_executor_id(store.workers, app_version=APP) == "local-2"


def test_an_id_held_by_a_live_process_is_refused_with_one_line(
    store: SqlSessionStore, sleeper: subprocess.Popen[bytes]
) -> None:
    _hold(store, "worker-1", sleeper.pid)
    with pytest.raises(ExecutorIdInUseError) as refused:
        claim_executor_id(store.workers, app_version=APP, requested="worker-1")
    message = str(refused.value)
    assert "\n" not in message and f"pid {sleeper.pid}" in message and "--executor-id" in message, message
    assert refused.value.code == "state_concurrency_conflict"
    with pytest.raises(ExecutorIdInUseError):
        refuse_live_executors(store.workers, ["gone", "worker-1"])
    refuse_live_executors(store.workers, ["gone"])  # no row: nothing to protect


def test_an_id_whose_process_died_is_taken_at_once_even_with_a_fresh_heartbeat(store: SqlSessionStore) -> None:
    process = subprocess.Popen(["sleep", "60"])
    _hold(store, "worker-1", process.pid)
    process.kill()  # not reaped yet: a zombie
    time.sleep(0.2)
    assert claim_executor_id(store.workers, app_version=APP, requested="worker-1") == "worker-1"
    process.wait()
    refuse_live_executors(store.workers, ["local"])


def test_ids_left_by_dead_processes_come_first_so_their_runs_are_recovered(
    store: SqlSessionStore, sleeper: subprocess.Popen[bytes]
) -> None:
    dead = subprocess.Popen(["sleep", "60"])
    _hold(store, "local", sleeper.pid)
    _hold(store, "local-3", dead.pid)
    dead.kill()
    dead.wait()
    # local is live, local-2 free, local-3 left by a process that died without releasing it:
    # the crashed process's id (and with it its runs in flight) is taken first.
    assert claim_executor_id(store.workers, app_version=APP) == "local-3"


def test_a_released_id_is_free_and_another_machine_is_judged_by_its_heartbeat(store: SqlSessionStore) -> None:
    _hold(store, "local", 1, hostname="other-host", age_ms=500)
    assert claim_executor_id(store.workers, app_version=APP) == "local-2"
    store.workers.release("local-2")
    assert _row(store, "local-2").pid == 0
    _hold(store, "local", 1, hostname="other-host", age_ms=60_000)  # its heartbeat stopped a minute ago
    assert claim_executor_id(store.workers, app_version=APP) == "local"


def test_two_processes_claiming_at_once_never_get_the_same_id(store: SqlSessionStore) -> None:
    """The claim is a compare-and-set: of two claims of one row as it was read, one wins."""
    row = None
    assert store.workers.claim("local", app_version=APP, now_ms=1, replacing=row) is True
    assert store.workers.claim("local", app_version=APP, now_ms=2, replacing=row) is False  # the row exists now
    seen = _row(store, "local")
    assert store.workers.claim("local", app_version=APP, now_ms=3, replacing=seen) is True
    assert store.workers.claim("local", app_version=APP, now_ms=4, replacing=seen) is False  # it moved since


# --- the bug, through real processes --------------------------------------------------------------


def _sqlite(tmp_path: Path) -> SqlSessionStore:
    return SqlSessionStore(f"sqlite:///{tmp_path / '.helix' / 'helix.sqlite'}")


def _text_of(store: SqlSessionStore, session_id: str) -> list[str]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(stream_chunks.c.chunk)
            .where(stream_chunks.c.stream_id == session_id, stream_chunks.c.type == "text_delta")
            .order_by(stream_chunks.c.sequence)
        )
        return [(json.loads(c) if isinstance(c, str) else c)["content"] for (c,) in rows]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_demos_on_one_database_each_run_their_own_run_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = cli_env()
    if backend == "postgres":
        env["HELIX_DATABASE_URL"] = request.getfixturevalue("new_migrated_database")("two_demos")
    first = CliProcess(tmp_path, "demo", "--step-delay", "1", env=env)
    first_session = first.wait_for(r"session (session-[0-9a-f]+)\s").group(1)
    first.wait_for(r"→ get_weather")  # its run is in flight: the second demo must leave it alone
    second = CliProcess(tmp_path, "demo", "--step-delay", "1", env=env)
    assert second.wait(timeout=120) == 0, second.output
    assert first.wait(timeout=120) == 0, first.output
    assert "recovering session" not in second.output, second.output
    assert "no longer owned" not in first.output + second.output
    url = env.get("HELIX_DATABASE_URL") or f"sqlite:///{tmp_path / '.helix' / 'helix.sqlite'}"
    store = SqlSessionStore(url)
    try:
        state = store.load_state(first_session)
        assert state is not None and state.status == "completed"
        text = "".join(_text_of(store, first_session))
        assert text.count("Checking the weather") == 1, text  # not stored twice by two executions
        ids = {w.executor_id: w for w in store.workers.list_workers()}
        assert {"local", "local-2"} <= set(ids), ids
        assert all(w.pid == 0 for w in ids.values()), ids  # both exited cleanly and released their ids
    finally:
        store.close()


def test_recover_refuses_a_live_executor_unless_forced(tmp_path: Path) -> None:
    demo = CliProcess(tmp_path, "demo", "--step-delay", "1.5")
    demo.wait_for(r"→ get_weather")
    refused = subprocess.run(
        [sys.executable, "-m", "helix_dbos.cli", "recover", "--executor-id", "local"],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0, refused.stdout + refused.stderr
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "in use by a live process" in lines[0] and "--force" in lines[0], refused.stderr
    assert "re-enqueued" not in refused.stdout
    assert demo.wait(timeout=120) == 0, demo.output
    assert "no longer owned" not in demo.output


# --- review: what can judge a holder wrongly ------------------------------------------------------


def test_a_token_from_another_machine_or_pid_namespace_is_judged_by_its_heartbeat(
    sleeper: subprocess.Popen[bytes],
) -> None:
    me = ProcessIdentity.current()
    now = int(time.time() * 1000)
    token = process_token(sleeper.pid)
    assert token is not None
    elsewhere = "another-boot/pid:[4026531836]:" + token.rsplit(":", 1)[1]  # same host name, other machine
    assert process_state(sleeper.pid, elsewhere) is ProcessState.UNKNOWN

    def row(**values: object) -> WorkerRecord:
        base = {"executor_id": "x", "app_version": APP, "hostname": me.hostname, "pid": sleeper.pid}
        return WorkerRecord.model_validate({**base, "started_at": now, "heartbeat_at": now, **values})

    fresh, stale = row(process_token=elsewhere), row(process_token=elsewhere, heartbeat_at=now - 60_000)
    assert holder_state(fresh, me, now=now, live_heartbeat_ms=30_000) == "live"
    assert holder_state(stale, me, now=now, live_heartbeat_ms=30_000) == "free"
    # No token (a row from before tokens, an OS without /proc): the heartbeat decides too.
    assert holder_state(row(process_token=None, heartbeat_at=now - 60_000), me, now=now, live_heartbeat_ms=30_000) == (
        "free"
    )


_CLAIM = """
import sys, time
from helix_dbos.runtime.identity import claim_executor_id
from helix_dbos.store import SqlSessionStore
store = SqlSessionStore(sys.argv[1])
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
print(claim_executor_id(store.workers, app_version="helix-dbos-1"), flush=True)
time.sleep(3)  # stay alive while the others claim: a live holder
"""


def test_processes_claiming_at_the_same_moment_get_distinct_ids(pg_store: SqlSessionStore, tmp_path: Path) -> None:
    script = tmp_path / "claim.py"
    script.write_text(_CLAIM)
    start = time.time() + 4.0  # after every process has imported helix-dbos
    claimers = [
        subprocess.Popen(
            [sys.executable, str(script), pg_store.url, str(start)], env=cli_env(), stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    ids = [c.communicate(timeout=60)[0].strip() for c in claimers]
    assert all(c.returncode == 0 for c in claimers), ids
    assert sorted(ids) == ["local", "local-2", "local-3", "local-4"], ids


_LEFT_IN_FLIGHT = """
import time
from pydantic import BaseModel
from helix_dbos import MockLLMAdapter, define_agent, define_tool, launch, shutdown

class Q(BaseModel):
    question: str

ask = define_tool("ask", description="Ask the user", input_schema=Q, execute="client")  # waits for a human
agent = define_agent("waiter", system_prompt="Ask.", llm_config="openai/gpt-4o-mini", tools=[ask])
call = {"id": "q1", "name": "ask", "arguments": {"question": "?"}}
model = MockLLMAdapter([{"type": "tool_calls", "tool_calls": [call]}])
executor = launch(agents=[agent], llm_adapter=model, hot_window_seconds=30)
handle = executor.execute(agent, "hi")
time.sleep(1.5)  # the run now waits for the answer, in its hot window
print("left:", shutdown(executor, drain_timeout_seconds=0.3), flush=True)
time.sleep(2)  # its thread wakes to a stopped DBOS meanwhile
"""


def test_a_run_left_in_flight_at_shutdown_keeps_the_id_and_is_not_reported_failed(tmp_path: Path) -> None:
    script = tmp_path / "left.py"
    script.write_text(_LEFT_IN_FLIGHT)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "left: ['session-" in done.stdout, done.stdout
    assert "failed" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    store = _sqlite(tmp_path)
    try:
        (row,) = [w for w in store.workers.list_workers() if w.executor_id == "local"]
        assert row.pid > 0, row  # not released: its run was left in flight
        (run,) = [r for s in store.list_sessions() for r in store.list_runs(s.session_id)]
        assert run.status == "running", run  # left to recovery, not failed
    finally:
        store.close()


def test_a_heartbeat_that_finds_its_id_held_by_another_live_process_logs_an_error(
    store: SqlSessionStore, sleeper: subprocess.Popen[bytes]
) -> None:
    from helix_dbos.runtime.identity import is_this_process

    assert claim_executor_id(store.workers, app_version=APP, requested="worker-9") == "worker-9"
    assert store.workers.renew("worker-9", APP, int(time.time() * 1000))  # ours: renewed
    _hold(store, "worker-9", sleeper.pid)  # someone else took it (a live process, judged dead by mistake)
    assert not store.workers.renew("worker-9", APP, int(time.time() * 1000))
    assert not is_this_process(_row(store, "worker-9"), ProcessIdentity.current())
    with pytest.raises(ExecutorIdInUseError):  # what the heartbeat logs, every round, as an error
        claim_executor_id(store.workers, app_version=APP, requested="worker-9")
