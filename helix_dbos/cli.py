"""The ``helix-dbos`` command line: demo, database migrations, workers, session inspection.

Every command takes ``--database-url`` (default: ``HELIX_DATABASE_URL``, else the embedded SQLite
files under ``.helix/``), so switching from the embedded default to PostgreSQL is one setting.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import signal
import threading
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from helix_dbos.agent import AgentConfig

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


def _url(database_url: str | None) -> str:
    from helix_dbos.runtime.launch import default_database_url

    return database_url or default_database_url()


@db_app.command("upgrade")
def db_upgrade(database_url: DatabaseUrl = None) -> None:
    """Create or upgrade the helix-dbos tables."""
    from helix_dbos.store.migrate import upgrade

    url = _url(database_url)
    upgrade(url)
    console.print(f"[green]helix-dbos tables are up to date[/green] in {url}")


@app.command()
def demo(
    database_url: DatabaseUrl = None,
    model: Annotated[
        str | None,
        typer.Option(help="A LiteLLM model string (e.g. openai/gpt-4o-mini); default: built-in scripted model."),
    ] = None,
    message: Annotated[
        str, typer.Option(help="What to ask the agent.")
    ] = "Compare the weather in Paris, Tokyo and Lima.",
) -> None:
    """Run the demo agent end to end and show its stream, result and transcript."""
    from helix_dbos.demo import DEMO_MODEL, DemoModel, build_demo_agent
    from helix_dbos.llm.litellm_adapter import LiteLLMAdapter
    from helix_dbos.llm.router import ModelRouter
    from helix_dbos.runtime.launch import launch, shutdown

    url = _url(database_url)
    agent = build_demo_agent(model or DEMO_MODEL)
    router = ModelRouter({"helix/": DemoModel()}, LiteLLMAdapter())
    console.print(
        f"[bold]helix-dbos demo[/bold]  model=[cyan]{agent.llm_config.model}[/cyan]  database=[cyan]{url}[/cyan]"
    )
    executor = launch(url, agents=[agent], llm_adapter=router)
    try:
        handle = executor.execute(agent, message)
        console.print(f"session [cyan]{handle.session_id}[/cyan]  run [cyan]{handle.run_id}[/cyan]\n")
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
            console.print(f"run {run.run_id}: turn {run.turn}, {run.status}, {run.step_count} steps")
        if result.status != "completed":
            raise typer.Exit(1)
    finally:
        shutdown(executor)


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


def _load_agents(spec: str) -> list[AgentConfig]:
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attr or "agents")
    if callable(value) and not isinstance(value, AgentConfig):
        value = value()
    agents = [value] if isinstance(value, AgentConfig) else list(value)
    if not all(isinstance(a, AgentConfig) for a in agents):
        raise typer.BadParameter(f"{spec} must name an AgentConfig, a list of them, or a function returning one")
    return agents


@app.command()
def worker(
    agents: Annotated[str, typer.Option(help="module:attribute naming your agents (an AgentConfig or a list).")],
    database_url: DatabaseUrl = None,
    executor_id: Annotated[
        str | None,
        typer.Option(envvar="HELIX_EXECUTOR_ID", help="Unique per live worker, stable across its restarts."),
    ] = None,
) -> None:
    """Run a worker: recover this executor's in-flight runs and execute new ones, until stopped."""
    from helix_dbos.runtime.launch import launch, shutdown

    loaded = _load_agents(agents)
    executor = launch(_url(database_url), agents=loaded, executor_id=executor_id)
    console.print(f"worker up: agents={[a.name for a in loaded]} executor_id={executor_id or 'default'}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        shutdown(executor)


@app.command()
def serve(
    agents: Annotated[str, typer.Option(help="module:attribute naming your agents (an AgentConfig or a list).")],
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
) -> None:
    """Serve agents over HTTP + SSE (PostgreSQL-only mode: one database URL; SQLite for local use).

    Refuses to start unless --token (or HELIX_API_TOKENS) or --allow-unauthenticated is given. Any
    number of servers and workers may share one PostgreSQL database.
    """
    from helix_dbos.service.auth import ServiceAuthConfigError
    from helix_dbos.service.server import check_auth, is_loopback, load_object, run_server, tokens_from_env

    tokens = list(token or []) or tokens_from_env()
    try:
        check_auth(tokens, allow_unauthenticated)
    except ServiceAuthConfigError as exc:
        typer.echo(f"helix-dbos serve: {exc.message}. Use --token TOKEN (or HELIX_API_TOKENS=t1,t2).", err=True)
        raise typer.Exit(2) from None
    if allow_unauthenticated and not is_loopback(host):
        typer.echo(f"WARNING: serving WITHOUT authentication on {host}: anyone who can reach it can run agents.")
    loaded = _load_agents(agents)
    adapter = load_object(llm_adapter) if llm_adapter else None
    typer.echo(f"helix-dbos serve: agents={[a.name for a in loaded]} on http://{host}:{port}")
    run_server(
        agents=loaded,
        database_url=_url(database_url),
        host=host,
        port=port,
        executor_id=executor_id,
        tokens=tokens,
        allow_unauthenticated=allow_unauthenticated,
        llm_adapter=adapter,
        hot_window_seconds=hot_window_seconds,
    )


def _store(database_url: str | None) -> Any:
    from helix_dbos.store.sql import SqlSessionStore

    return SqlSessionStore(_url(database_url))


@sessions_app.command("list")
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
def recover(
    executor_id: Annotated[list[str], typer.Option("--executor-id", help="Executor id of a worker that is gone.")],
    database_url: DatabaseUrl = None,
) -> None:
    """Take over the in-flight runs of workers that will not come back.

    Re-enqueues their pending workflows so that any live worker picks them up. Workers also do this
    on their own once a worker's heartbeat is older than ``takeover_after_seconds``.
    """
    from dbos import DBOS

    from helix_dbos.runtime.launch import dbos_config_for

    url = _url(database_url)
    DBOS(config=dbos_config_for(url, executor_id="helix-dbos-recover"))
    DBOS.launch()
    try:
        handles = DBOS._recover_pending_workflows(list(executor_id))
        console.print(f"re-enqueued {len(handles)} run(s) of {', '.join(executor_id)} for the live workers")
    finally:
        DBOS.destroy()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
