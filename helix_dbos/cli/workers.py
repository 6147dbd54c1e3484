"""Workers and recovery: ``worker``, ``recover`` and ``queue-status``.

``worker`` and ``recover --agents`` say which runs they recover at start-up (those a killed
process left in flight) and how each ended.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from helix_dbos.agent import AgentConfig
from helix_dbos.cli.common import (
    AGENTS_HELP,
    AGENTS_METAVAR,
    DatabaseUrl,
    JsonOutput,
    QueueSpec,
    QueueToShow,
    RateLimitSpecs,
    app,
    cli_settings,
    console,
    existing_url,
    friendly,
    open_store,
    parse_queue,
    print_json,
    rate_limits_flag,
    resolve_url,
    sqlite_path,
)
from helix_dbos.cli.demo_run import report_recovered
from helix_dbos.cli.gc import GcEvery, GcPolicy, background_policy, start_sweeper
from helix_dbos.cli.inputs import configure_cli_logging, load_agents

if TYPE_CHECKING:
    from helix_dbos.runtime.executor import DBOSAgentExecutor

__all__ = ["queue_status", "recover", "worker"]


def _watch_recovery(executor: DBOSAgentExecutor, stop: threading.Event) -> threading.Thread | None:
    """Name the runs being recovered now, and report each one's end from one background thread.

    The thread reads run records, not DBOS events: after a crash with hundreds of runs in flight
    that is one indexed query per half second, not a waiting thread per run.
    """
    from helix_dbos.runtime.launch import recovering_runs

    runs = recovering_runs(executor)
    for run in runs:
        session = executor.reads.get_session(run.session_id)
        agent_name = session.agent_type if session is not None else "?"
        console.print(f"recovering session {run.session_id} (run {run.run_id}, agent {agent_name})", soft_wrap=True)
    if not runs:
        return None

    def report() -> None:
        waiting = {run.run_id for run in runs}
        while waiting and not stop.wait(0.5):
            try:
                still = _running_run_ids(executor)
                for run_id in sorted(waiting - still):
                    ended = executor.reads.get_run(run_id)
                    if ended is not None:
                        report_recovered(ended, ended)
                    waiting.discard(run_id)
            except Exception:  # the database is away: try again next round
                continue

    thread = threading.Thread(target=report, name="helix-recovery-report", daemon=True)
    thread.start()
    return thread


def _running_run_ids(executor: DBOSAgentExecutor) -> set[str]:
    running: set[str] = set()
    after: str | None = None
    while page := executor.reads.list_running_runs(after_run_id=after, limit=1000):
        running.update(run.run_id for run in page)
        after = page[-1].run_id
    return running


@app.command()
@friendly
def worker(
    agents: Annotated[
        str,
        typer.Option(metavar=AGENTS_METAVAR, help=AGENTS_HELP),
    ],
    database_url: DatabaseUrl = None,
    executor_id: Annotated[
        str | None,
        typer.Option(
            metavar="ID", help="Unique per live worker, stable across its restarts. Default: HELIX_EXECUTOR_ID."
        ),
    ] = None,
    queue: QueueSpec = None,
    rate_limit: RateLimitSpecs = None,
    llm_adapter: Annotated[str | None, typer.Option(hidden=True, help="module:attribute of an LLMAdapter.")] = None,
    takeover_after: Annotated[
        float, typer.Option(hidden=True, help="Seconds before a silent worker's runs move.")
    ] = 30.0,
    gc_every: GcEvery = None,
    gc_policy: GcPolicy = None,
) -> None:
    """Run a worker: recover this executor's in-flight runs and execute new ones, until stopped.

    With --queue it runs the runs any server or worker enqueued there, within the queue's limits.
    With --gc-every and --gc-policy it also deletes what is past the retention policy, one
    collection at a time across all workers.
    """
    from helix_dbos.cli.model_check import check_agent_models
    from helix_dbos.runtime.launch import launch, shutdown

    settings = cli_settings(
        database_url=database_url, executor_id=executor_id, run_queue=queue, rate_limits=rate_limits_flag(rate_limit)
    )
    url = resolve_url(settings.database_url)
    retention = background_policy(gc_every, gc_policy)
    loaded = load_agents(agents)
    run_queue = parse_queue(settings.run_queue)
    adapter = None
    if llm_adapter:
        from helix_dbos.service.server import load_object

        adapter = load_object(llm_adapter)
    else:  # the default adapter: a model it cannot run is one line now, not a failed run later
        check_agent_models(loaded)
    configure_cli_logging(settings)
    executor = launch(
        url,
        settings=settings,
        agents=loaded,
        queue=run_queue,
        llm_adapter=adapter,
        takeover_after_seconds=takeover_after,
    )
    sweeper = None if retention is None or gc_every is None else start_sweeper(url, retention, gc_every)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # before "worker up": a SIGTERM after it stops cleanly
    console.print(
        f"worker up: agents={[a.name for a in loaded]} executor_id={executor.executor_id}"
        + (f" queue={run_queue.name}" if run_queue else ""),
        soft_wrap=True,
    )
    interrupted = False
    try:
        _watch_recovery(executor, stop)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if sweeper is not None:
            sweeper.stop()
        left = shutdown(executor)
        if left:
            console.print(
                f"{len(left)} run(s) still in flight: they resume when executor {executor.executor_id} starts again"
            )
    if interrupted:  # Ctrl-C exits 130 as serve, demo and tail do; SIGTERM, a supervisor's stop, exits 0
        raise typer.Exit(130)


@app.command("queue-status")
@friendly
def queue_status(queue: QueueToShow = None, database_url: DatabaseUrl = None, as_json: JsonOutput = False) -> None:
    """Show a run queue's depth and how many runs each worker is running."""
    from dbos import DBOSClient

    from helix_dbos.runtime.launch import dbos_system_database_url
    from helix_dbos.runtime.queues import RunQueue, queue_status

    run_queue = parse_queue(queue) or RunQueue()
    system_url = dbos_system_database_url(existing_url(database_url))
    system_file = sqlite_path(system_url)
    if system_file is not None and not system_file.exists():  # no process has run here yet (nor made it)
        status = queue_status(_NoWorkflows(), run_queue)
    else:
        client = DBOSClient(system_database_url=system_url)
        try:
            status = queue_status(client, run_queue)
        finally:
            client.destroy()
    if as_json:
        print_json(status.model_dump(mode="json"))
        return
    console.print(f"queue {status.name}: {status.enqueued} waiting, {status.running} running", soft_wrap=True)
    for worker_id, running in status.running_by_worker.items():
        console.print(f"  {worker_id}: {running} running", soft_wrap=True)


class _NoWorkflows:
    """The workflows of a SQLite database DBOS has not run on: none (its file is not there yet)."""

    def list_workflows(self, **_: Any) -> list[Any]:
        return []


@app.command()
@friendly
def recover(
    executor_id: Annotated[
        list[str],
        typer.Option("--executor-id", metavar="ID", help="Executor id of a worker that is gone (repeatable)."),
    ],
    database_url: DatabaseUrl = None,
    agents: Annotated[
        str | None,
        typer.Option(
            metavar=AGENTS_METAVAR,
            help="Run the recovered runs here with these agents (module:attribute, or demo), and wait.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Recover even an executor id that a live process holds (runs twice).")
    ] = False,
) -> None:
    """Re-run the in-flight runs of workers that will not come back.

    Puts their runs back on DBOS's queue, where any live worker or server with their agents picks
    them up (any executor id); workers also do this on their own once a worker's heartbeat is older
    than takeover_after_seconds. With --agents, this command runs them itself and reports how each
    ended. Runs already waiting on the queue are listed too.
    """
    from helix_dbos.runtime.identity import refuse_live_executors
    from helix_dbos.runtime.launch import APPLICATION_VERSION, dbos_system_database_url
    from helix_dbos.runtime.recovery import requeue_pending_runs

    url = resolve_url(database_url)
    loaded = load_agents(agents) if agents is not None else None  # a bad --agents is reported first
    if not force:  # a live executor's runs in flight would run twice at once
        checked = open_store(database_url)
        try:
            refuse_live_executors(checked.workers, list(executor_id))
        finally:
            checked.close()
    if loaded is not None:
        _recover_here(url, list(executor_id), loaded)
        return
    from dbos import DBOSClient

    store = open_store(database_url)  # first: a missing or unmigrated database is reported as such
    try:
        system_url = dbos_system_database_url(url)
        requeued: list[str] = []
        queued: list[str] = []
        if not system_url.startswith("sqlite:") or Path(system_url.removeprefix("sqlite:///")).exists():
            client = DBOSClient(system_database_url=system_url)
            try:
                requeued, queued = requeue_pending_runs(client, list(executor_id), APPLICATION_VERSION)
            finally:
                client.destroy()
        _print_requeued(store, list(executor_id), requeued, queued)
        if requeued or queued:
            console.print(_worker_hint(store))
    finally:
        store.close()


def _print_requeued(store: Any, executor_ids: list[str], requeued: list[str], queued: list[str]) -> None:
    console.print(f"re-enqueued {len(requeued)} run(s) of {', '.join(executor_ids)}", soft_wrap=True)
    for label, workflow_ids in (("re-enqueued", requeued), ("waiting in the queue", queued)):
        for workflow_id in workflow_ids:
            run = store.get_run(workflow_id)
            session = run.session_id if run is not None else "?"
            console.print(f"  {label}: session {session} (run {workflow_id})", soft_wrap=True)


def _worker_hint(store: Any) -> str:
    import time

    live = [
        w.executor_id
        for w in store.workers.list_workers()
        if w.pid > 0 and w.heartbeat_at > time.time() * 1000 - 30_000
    ]
    if live:
        return f"live workers that will pick them up: {', '.join(sorted(live))}"
    return (
        "no live worker: start one with their agents (helix-dbos worker --agents ...), "
        "or run them here with helix-dbos recover --agents ..."
    )


def _recover_here(url: str, executor_ids: list[str], loaded: list[AgentConfig]) -> None:
    from dbos import DBOS

    from helix_dbos.runtime.handle import AgentExecutionHandle
    from helix_dbos.runtime.launch import launch, shutdown
    from helix_dbos.runtime.recovery import requeue_pending_runs

    executor = launch(url, agents=loaded, executor_id_base="helix-dbos-recover")
    failed = 0
    try:
        requeued, queued = requeue_pending_runs(DBOS, executor_ids, str(DBOS.application_version))
        _print_requeued(executor.reads, executor_ids, requeued, queued)
        for workflow_id in [*requeued, *queued]:
            run = executor.reads.get_run(workflow_id)
            session = executor.reads.get_session(run.session_id) if run is not None else None
            if run is None or session is None or executor.registry.get(session.agent_type) is None:
                console.print(f"  skipped {workflow_id}: its agent is not among --agents", soft_wrap=True)
                continue
            result = AgentExecutionHandle(executor, run, session.agent_type).result()
            report_recovered(run, result)
            failed += result.status == "failed"
    finally:
        shutdown(executor)
    if failed:
        raise typer.Exit(1)
