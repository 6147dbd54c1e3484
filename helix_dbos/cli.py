"""The ``helix-dbos`` command line: demo, database migrations, workers, session inspection.

Every command takes ``--database-url`` (default: ``HELIX_DATABASE_URL``, else the embedded SQLite
files under ``.helix/``), so switching from the embedded default to PostgreSQL is one setting.
Foreseeable failures (a bad URL or ``--agents``, a database that is missing or unreachable) are one
line on stderr and a non-zero exit code (``cli_input.py``).

``demo``, ``worker`` and ``recover --agents`` say which runs they recover at start-up (those a
killed process left in flight) and how each ended.
"""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from helix_dbos.agent import AgentConfig
from helix_dbos.cli_input import check_database_url, configure_cli_logging, explain, load_agents

if TYPE_CHECKING:
    from helix_dbos.runtime.executor import DBOSAgentExecutor
    from helix_dbos.runtime.queues import RunQueue
    from helix_dbos.store.base import RunRecord

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(help="helix-dbos: durable AI agents on DBOS.", no_args_is_help=True, add_completion=False)
db_app = typer.Typer(help="Database schema management.", no_args_is_help=True)
sessions_app = typer.Typer(help="Inspect sessions.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(sessions_app, name="sessions")
console = Console()

DatabaseUrl = Annotated[
    str | None,
    typer.Option("--database-url", envvar="HELIX_DATABASE_URL", help="SQLAlchemy URL (PostgreSQL or SQLite)."),
]

QueueSpec = Annotated[
    str | None,
    typer.Option(
        "--queue",
        envvar="HELIX_RUN_QUEUE",
        help="Enqueue runs on this DBOS queue, for any worker: NAME[:concurrency=N,worker_concurrency=N,"
        "limit=N/SECONDS,poll=SECONDS]. Every server and worker of a deployment takes the same one.",
    ),
]


def _queue(spec: str | None) -> RunQueue | None:
    from helix_dbos.runtime.queues import RunQueue

    if spec is None:
        return None
    try:
        return RunQueue.parse(spec)
    except ValueError as exc:
        typer.echo(f"helix-dbos: bad --queue {spec!r}: {exc}", err=True)
        raise typer.Exit(2) from None


def _url(database_url: str | None) -> str:
    from helix_dbos.runtime.launch import default_database_url

    return check_database_url(database_url or default_database_url())


def _shown(url: str) -> str:
    """``url`` with its password masked, for printing."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@contextmanager
def _one_line_errors() -> Iterator[None]:
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:
        error = explain(exc)
        if error is None:
            raise
        typer.echo(f"helix-dbos: {error.message}", err=True)
        raise typer.Exit(error.exit_code) from None


def _friendly(command: F) -> F:
    """Report the command's foreseeable failures as one line (see ``cli_input.py``)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _one_line_errors():
            return command(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@db_app.command("upgrade")
@_friendly
def db_upgrade(database_url: DatabaseUrl = None) -> None:
    """Create or upgrade the helix-dbos tables."""
    from helix_dbos.store.migrate import upgrade

    url = _url(database_url)
    upgrade(url)
    console.print(f"[green]helix-dbos tables are up to date[/green] in {_shown(url)}")


@app.command()
@_friendly
def demo(
    database_url: DatabaseUrl = None,
    model: Annotated[
        str | None,
        typer.Option(help="A LiteLLM model string (e.g. openai/gpt-4o-mini); default: built-in scripted model."),
    ] = None,
    message: Annotated[
        str, typer.Option(help="What to ask the agent.")
    ] = "Compare the weather in Paris, Tokyo and Lima.",
    step_delay: Annotated[
        float,
        typer.Option(
            "--step-delay",
            min=0.0,
            help="Seconds every model step and tool call takes, so you can kill the demo mid-run (try 1.5).",
        ),
    ] = 0.0,
) -> None:
    """Run the demo agent end to end and show its stream, result and transcript.

    A demo run that a killed demo left in flight is finished first, and reported.
    """
    from helix_dbos.demo import DEMO_MODEL, DemoModel, build_demo_agent
    from helix_dbos.llm.litellm import LiteLLMAdapter
    from helix_dbos.llm.router import ModelRouter
    from helix_dbos.runtime.launch import launch, recovering_runs, shutdown

    url = _url(database_url)
    agent = build_demo_agent(model or DEMO_MODEL, step_delay_seconds=step_delay)
    router = ModelRouter({DEMO_MODEL: DemoModel(step_delay)}, LiteLLMAdapter())
    console.print(
        f"[bold]helix-dbos demo[/bold]  model=[cyan]{agent.llm_config.model}[/cyan]  "
        f"database=[cyan]{_shown(url)}[/cyan]",
        soft_wrap=True,
    )
    executor = launch(url, agents=[agent], llm_adapter=router)
    try:
        for run in recovering_runs(executor):
            _finish_recovered(executor, run)
        handle = executor.execute(agent, message)
        console.print(f"session [cyan]{handle.session_id}[/cyan]  run [cyan]{handle.run_id}[/cyan]\n", soft_wrap=True)
        result = asyncio.run(_watch(handle))
        console.print()
        style = "green" if result.status == "completed" else "red"
        console.print(f"status: [{style}]{result.status}[/{style}]")
        if result.error:
            console.print(f"error: [red]{result.error}[/red]")
        output = result.output.model_dump() if hasattr(result.output, "model_dump") else result.output
        console.print_json(json.dumps(output))
        state = handle.get_state()
        console.print(
            f"\n{len(state.messages)} messages, {state.step_count} steps, custom state: {_json(state.custom_state)}"
        )
        for run in executor.list_runs(handle.session_id):
            console.print(f"run {run.run_id}: turn {run.turn}, {run.status}, {run.step_count} steps", soft_wrap=True)
        if result.status != "completed":
            raise typer.Exit(1)
    finally:
        shutdown(executor)


def _finish_recovered(executor: DBOSAgentExecutor, run: RunRecord) -> None:
    """Show a recovered demo run's stream from its start while it finishes, then how it ended."""
    from helix_dbos.runtime.handle import AgentExecutionHandle

    session = executor.store.load_session(run.session_id)
    if session is None or executor.registry.get(session.agent_type) is None:
        return  # not a demo run: a worker with its agent will finish it
    console.print(
        f"[bold yellow]↻ recovering session {run.session_id}[/bold yellow]: its run {run.run_id} was in flight "
        "when the process running it died; finishing it (completed steps are not run again)",
        soft_wrap=True,
    )
    result = asyncio.run(_watch(AgentExecutionHandle(executor, run, session.agent_type)))
    _report_recovered(run, result)
    console.print()


def _report_recovered(run: RunRecord, result: Any) -> None:
    """``recovered session ID: STATUS (error)``; ``result`` is an ``AgentResult`` or the run record."""
    style = {"completed": "green", "failed": "red"}.get(result.status, "yellow")
    line = f"[{style}]recovered session {run.session_id}: {result.status}[/{style}]"
    if result.error:
        line += f" ({result.error})"
    console.print(line, soft_wrap=True)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def _watch(handle: Any) -> Any:
    stream = await handle.stream()

    async def show() -> None:
        if stream is None:
            return
        async for chunk in stream:
            if chunk.type == "text_delta":
                console.print(chunk.content, end="", style="white")
            elif chunk.type == "tool_start":
                console.print(f"\n[yellow]→ {chunk.tool_name}[/yellow] {_json(chunk.arguments)}")
            elif chunk.type == "tool_end":
                colour = "green" if chunk.success else "red"
                shown = chunk.result if chunk.success else chunk.error
                console.print(f"[{colour}]← {chunk.tool_name}[/{colour}] {_json(shown)}")
            elif chunk.type == "custom":
                console.print(f"[magenta]• {chunk.event_name}[/magenta] {_json(chunk.data)}")
            elif chunk.type == "output":
                console.print("\n[bold green]output[/bold green]")

    watcher = asyncio.create_task(show())
    result = await handle.result_async()
    try:
        await asyncio.wait_for(watcher, timeout=2)
    except TimeoutError:
        watcher.cancel()
    return result


def _watch_recovery(executor: DBOSAgentExecutor, stop: threading.Event) -> threading.Thread | None:
    """Name the runs being recovered now, and report each one's end from one background thread.

    The thread reads run records, not DBOS events: after a crash with hundreds of runs in flight
    that is one indexed query per half second, not a waiting thread per run.
    """
    from helix_dbos.runtime.launch import recovering_runs

    runs = recovering_runs(executor)
    for run in runs:
        session = executor.store.load_session(run.session_id)
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
                    ended = executor.store.get_run(run_id)
                    if ended is not None:
                        _report_recovered(ended, ended)
                    waiting.discard(run_id)
            except Exception:  # the database is away: try again next round
                continue

    thread = threading.Thread(target=report, name="helix-recovery-report", daemon=True)
    thread.start()
    return thread


def _running_run_ids(executor: DBOSAgentExecutor) -> set[str]:
    running: set[str] = set()
    after: str | None = None
    while page := executor.store.list_running_runs(after_run_id=after, limit=1000):
        running.update(run.run_id for run in page)
        after = page[-1].run_id
    return running


@app.command()
@_friendly
def worker(
    agents: Annotated[
        str,
        typer.Option(help="module:attribute naming your agents (an AgentConfig or a list), or demo."),
    ],
    database_url: DatabaseUrl = None,
    executor_id: Annotated[
        str | None,
        typer.Option(envvar="HELIX_EXECUTOR_ID", help="Unique per live worker, stable across its restarts."),
    ] = None,
    queue: QueueSpec = None,
    llm_adapter: Annotated[str | None, typer.Option(hidden=True, help="module:attribute of an LLMAdapter.")] = None,
    takeover_after: Annotated[
        float, typer.Option(hidden=True, help="Seconds before a silent worker's runs move.")
    ] = 30.0,
) -> None:
    """Run a worker: recover this executor's in-flight runs and execute new ones, until stopped.

    With --queue it runs the runs any server or worker enqueued there, within the queue's limits.
    """
    from helix_dbos.runtime.launch import launch, shutdown

    url = _url(database_url)
    loaded = load_agents(agents)
    run_queue = _queue(queue)
    adapter = None
    if llm_adapter:
        from helix_dbos.service.server import load_object

        adapter = load_object(llm_adapter)
    configure_cli_logging()
    executor = launch(
        url,
        agents=loaded,
        executor_id=executor_id,
        queue=run_queue,
        llm_adapter=adapter,
        takeover_after_seconds=takeover_after,
    )
    console.print(
        f"worker up: agents={[a.name for a in loaded]} executor_id={executor.executor_id}"
        + (f" queue={run_queue.name}" if run_queue else ""),
        soft_wrap=True,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        _watch_recovery(executor, stop)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        left = shutdown(executor)
        if left:
            console.print(
                f"{len(left)} run(s) still in flight: they resume when executor {executor.executor_id} starts again"
            )


@app.command()
@_friendly
def serve(
    agents: Annotated[
        str,
        typer.Option(help="module:attribute naming your agents (an AgentConfig or a list), or demo."),
    ],
    database_url: DatabaseUrl = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    executor_id: Annotated[
        str | None,
        typer.Option(envvar="HELIX_EXECUTOR_ID", help="Unique per live server, stable across its restarts."),
    ] = None,
    token: Annotated[
        list[str] | None,
        typer.Option(
            "--token",
            help="A bearer token clients must send (repeatable). Default: HELIX_API_TOKENS, comma-separated.",
        ),
    ] = None,
    allow_unauthenticated: Annotated[
        bool, typer.Option("--allow-unauthenticated", help="Serve without authentication, on purpose.")
    ] = False,
    llm_adapter: Annotated[str | None, typer.Option(hidden=True, help="module:attribute of an LLMAdapter.")] = None,
    hot_window_seconds: Annotated[float | None, typer.Option(hidden=True)] = None,
    queue: QueueSpec = None,
    execute: Annotated[
        bool, typer.Option("--execute/--no-execute", help="Also run agents here (--no-execute needs --queue).")
    ] = True,
) -> None:
    """Serve agents over HTTP + SSE (PostgreSQL-only mode: one database URL; SQLite for local use).

    Refuses to start unless --token (or HELIX_API_TOKENS) or --allow-unauthenticated is given. Any
    number of servers and workers may share one PostgreSQL database. With --queue, runs are
    enqueued for the workers; --no-execute then leaves running them to the workers alone.
    """
    run_queue = _queue(queue)
    if not execute and run_queue is None:
        typer.echo("helix-dbos serve: --no-execute needs --queue (or HELIX_RUN_QUEUE): nothing would run", err=True)
        raise typer.Exit(2)
    from helix_dbos.errors import ServiceAuthConfigError
    from helix_dbos.service.server import check_auth, is_loopback, load_object, run_server, tokens_from_env

    tokens = list(token or []) or tokens_from_env()
    try:
        check_auth(tokens, allow_unauthenticated)
    except ServiceAuthConfigError as exc:
        typer.echo(f"helix-dbos serve: {exc.message}. Use --token TOKEN (or HELIX_API_TOKENS=t1,t2).", err=True)
        raise typer.Exit(2) from None
    if allow_unauthenticated and not is_loopback(host):
        typer.echo(f"WARNING: serving WITHOUT authentication on {host}: anyone who can reach it can run agents.")
    url = _url(database_url)
    loaded = load_agents(agents)
    adapter = load_object(llm_adapter) if llm_adapter else None
    configure_cli_logging()
    typer.echo(f"helix-dbos serve: agents={[a.name for a in loaded]} on http://{host}:{port}")
    run_server(
        agents=loaded,
        database_url=url,
        host=host,
        port=port,
        executor_id=executor_id,
        tokens=tokens,
        allow_unauthenticated=allow_unauthenticated,
        llm_adapter=adapter,
        hot_window_seconds=hot_window_seconds,
        queue=run_queue,
        execute=execute,
    )


@app.command("queue-status")
@_friendly
def queue_status(queue: QueueSpec = None, database_url: DatabaseUrl = None) -> None:
    """Show a run queue's depth and how many runs each worker is running."""
    from dbos import DBOSClient

    from helix_dbos.runtime.launch import dbos_system_database_url
    from helix_dbos.runtime.queues import RunQueue, queue_status

    run_queue = _queue(queue) or RunQueue()
    client = DBOSClient(system_database_url=dbos_system_database_url(_url(database_url)))
    try:
        status = queue_status(client, run_queue)
    finally:
        client.destroy()
    console.print(f"queue {status.name}: {status.enqueued} waiting, {status.running} running", soft_wrap=True)
    for worker_id, running in status.running_by_worker.items():
        console.print(f"  {worker_id}: {running} running", soft_wrap=True)


def _store(database_url: str | None) -> Any:
    from helix_dbos.store import SqlSessionStore

    return SqlSessionStore(_url(database_url))


@sessions_app.command("list")
@_friendly
def sessions_list(
    database_url: DatabaseUrl = None,
    status: Annotated[str | None, typer.Option(help="Only sessions in this status.")] = None,
    limit: int = 20,
) -> None:
    """List recent sessions."""
    store = _store(database_url)
    table = Table("session", "agent", "status", "turn", "steps", "messages", "updated")
    for s in store.list_sessions(status=status, limit=limit):
        table.add_row(
            s.session_id,
            s.agent_type,
            s.status,
            str(s.turn),
            str(s.step_count),
            str(s.message_count),
            str(s.updated_at),
        )
    console.print(table)


@sessions_app.command("show")
@_friendly
def sessions_show(session_id: str, database_url: DatabaseUrl = None) -> None:
    """Show a session's runs and transcript."""
    store = _store(database_url)
    state = store.load_state(session_id)
    if state is None:
        console.print(f"[red]no session {session_id!r}[/red]")
        raise typer.Exit(1)
    console.print(f"[bold]{session_id}[/bold] agent={state.agent_type} status={state.status} steps={state.step_count}")
    for run in store.list_runs(session_id):
        console.print(f"  run {run.run_id}: turn {run.turn} {run.status} ({run.step_count} steps)")
    for i, m in enumerate(state.messages):
        console.print(f"  [{i}] {m.role}: {m.model_dump_json(exclude_none=True, exclude={'role'})[:200]}")
    console.print(f"custom state: {_json(state.custom_state)}")
    open_calls = store.pending.open_calls(session_id)
    if open_calls:
        table = Table("pending tool call", "tool", "kind", "arguments", "delivery", "deadline")
        for call in open_calls:
            table.add_row(
                call.tool_call_id,
                call.tool_name,
                call.kind,
                _json(call.arguments),
                call.delivery,
                str(call.deadline_ms),
            )
        console.print(table)
    else:
        console.print("no pending tool calls or approvals")


@app.command()
@_friendly
def recover(
    executor_id: Annotated[list[str], typer.Option("--executor-id", help="Executor id of a worker that is gone.")],
    database_url: DatabaseUrl = None,
    agents: Annotated[
        str | None,
        typer.Option(help="Run the recovered runs here with these agents (module:attribute, or demo), and wait."),
    ] = None,
) -> None:
    """Re-run the in-flight runs of workers that will not come back.

    Puts their runs back on DBOS's queue, where any live worker or server with their agents picks
    them up (any executor id); workers also do this on their own once a worker's heartbeat is older
    than ``takeover_after_seconds``. With ``--agents``, this command runs them itself and reports
    how each ended. Runs already waiting on the queue are listed too.
    """
    from helix_dbos.runtime.launch import APPLICATION_VERSION, dbos_system_database_url
    from helix_dbos.runtime.recovery import requeue_pending_runs

    url = _url(database_url)
    if agents is not None:
        _recover_here(url, list(executor_id), load_agents(agents))
        return
    from dbos import DBOSClient

    store = _store(database_url)  # first: a missing or unmigrated database is reported as such
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

    live = [w.executor_id for w in store.workers.list_workers() if w.heartbeat_at > time.time() * 1000 - 30_000]
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

    executor = launch(url, agents=loaded, executor_id="helix-dbos-recover")
    failed = 0
    try:
        requeued, queued = requeue_pending_runs(DBOS, executor_ids, str(DBOS.application_version))
        _print_requeued(executor.store, executor_ids, requeued, queued)
        for workflow_id in [*requeued, *queued]:
            run = executor.store.get_run(workflow_id)
            session = executor.store.load_session(run.session_id) if run is not None else None
            if run is None or session is None or executor.registry.get(session.agent_type) is None:
                console.print(f"  skipped {workflow_id}: its agent is not among --agents", soft_wrap=True)
                continue
            result = AgentExecutionHandle(executor, run, session.agent_type).result()
            _report_recovered(run, result)
            failed += result.status == "failed"
    finally:
        shutdown(executor)
    if failed:
        raise typer.Exit(1)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
