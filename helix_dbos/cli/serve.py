"""``helix-dbos serve``: the HTTP + SSE service (``helix_dbos.service``) from the command line."""

from __future__ import annotations

import socket
from typing import Annotated, NoReturn

import typer

from helix_dbos.cli.common import (
    AGENTS_HELP,
    AGENTS_METAVAR,
    DatabaseUrl,
    QueueSpec,
    RateLimitSpecs,
    app,
    cli_settings,
    friendly,
    parse_queue,
    rate_limits_flag,
    resolve_url,
    shown_url,
)
from helix_dbos.cli.inputs import configure_cli_logging, load_agents

__all__ = ["serve"]


@app.command()
@friendly
def serve(
    agents: Annotated[
        str,
        typer.Option(metavar=AGENTS_METAVAR, help=AGENTS_HELP),
    ],
    database_url: DatabaseUrl = None,
    host: Annotated[str, typer.Option(metavar="HOST", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port to listen on.")] = 8000,
    executor_id: Annotated[
        str | None,
        typer.Option(
            metavar="ID", help="Unique per live server, stable across its restarts. Default: HELIX_EXECUTOR_ID."
        ),
    ] = None,
    token: Annotated[
        list[str] | None,
        typer.Option(
            "--token",
            metavar="TOKEN",
            help="A bearer token clients must send (repeatable). Default: HELIX_API_TOKENS, comma-separated.",
        ),
    ] = None,
    tenant_token: Annotated[
        list[str] | None,
        typer.Option(
            "--tenant-token",
            metavar="TENANT=TOKEN",
            help="A bearer token of a named tenant (repeatable): its callers see and start that tenant's "
            "sessions only. Default: HELIX_TENANT_TOKENS, comma-separated.",
        ),
    ] = None,
    allow_unauthenticated: Annotated[
        bool, typer.Option("--allow-unauthenticated", help="Serve without authentication, on purpose.")
    ] = False,
    llm_adapter: Annotated[str | None, typer.Option(hidden=True, help="module:attribute of an LLMAdapter.")] = None,
    hot_window_seconds: Annotated[float | None, typer.Option(hidden=True)] = None,
    queue: QueueSpec = None,
    rate_limit: RateLimitSpecs = None,
    execute: Annotated[
        bool, typer.Option("--execute/--no-execute", help="Also run agents here (--no-execute needs --queue).")
    ] = True,
    a2a: Annotated[
        bool, typer.Option("--a2a", help="Also serve every agent over A2A at /a2a/AGENT (needs helix-dbos[a2a]).")
    ] = False,
) -> None:
    """Serve agents over HTTP + SSE, with the inspector at /ui: one database URL, nothing else to run.

    On SQLite (the default) for one process on one machine; on PostgreSQL any number of servers
    and workers share one database. Refuses to start unless --token (or HELIX_API_TOKENS) or
    --allow-unauthenticated is given. With --queue, runs are enqueued for the workers;
    --no-execute then leaves running them to the workers alone.
    """
    settings = cli_settings(
        database_url=database_url,
        executor_id=executor_id,
        run_queue=queue,
        rate_limits=rate_limits_flag(rate_limit),
        hot_window_seconds=hot_window_seconds,
        api_tokens=tuple(token) if token else None,
        tenant_tokens=tuple(tenant_token) if tenant_token else None,
    )
    run_queue = parse_queue(settings.run_queue)
    if not execute and run_queue is None:
        typer.echo("helix-dbos serve: --no-execute needs --queue (or HELIX_RUN_QUEUE): nothing would run", err=True)
        raise typer.Exit(2)
    from helix_dbos.cli.model_check import check_agent_models
    from helix_dbos.errors import ServiceAuthConfigError
    from helix_dbos.service.server import check_auth, is_loopback, load_object, run_server

    tokens = settings.bearer_tokens()
    if not tokens and not allow_unauthenticated:
        typer.echo(
            "helix-dbos serve: refusing to serve agents without authentication: pass --token TOKEN "
            "or --tenant-token TENANT=TOKEN (repeatable), or set HELIX_API_TOKENS=t1,t2, or pass "
            "--allow-unauthenticated to serve without it on purpose",
            err=True,
        )
        raise typer.Exit(2)
    try:
        check_auth(tokens, allow_unauthenticated)
    except ServiceAuthConfigError as exc:
        typer.echo(f"helix-dbos serve: {exc.message}. Use --token TOKEN (or HELIX_API_TOKENS=t1,t2).", err=True)
        raise typer.Exit(2) from None
    if allow_unauthenticated and not is_loopback(host):
        typer.echo(f"WARNING: serving WITHOUT authentication on {host}: anyone who can reach it can run agents.")
    if a2a:  # before the database is touched: a missing extra is one line, not a launched server
        from helix_dbos.a2a.sdk import require_a2a_sdk

        require_a2a_sdk()
    url = resolve_url(settings.database_url)
    loaded = load_agents(agents)
    adapter = load_object(llm_adapter) if llm_adapter else None
    if adapter is None:  # the default adapter: a model it cannot run is one line now, not a failed run later
        check_agent_models(loaded)
    _check_port(host, port)  # before the banner and the launch: a busy port must not start DBOS or recover runs
    configure_cli_logging(settings)
    base = f"http://{_url_host(host)}:{port}"
    typer.echo(
        f"helix-dbos serve: agents={[a.name for a in loaded]} on {base} (inspector: {base}/ui) "
        f"database={shown_url(url)}"
    )
    run_server(
        agents=loaded,
        database_url=url,
        host=host,
        port=port,
        executor_id=settings.executor_id,
        tokens=tokens,
        allow_unauthenticated=allow_unauthenticated,
        llm_adapter=adapter,
        queue=run_queue,
        execute=execute,
        settings=settings,
        a2a=a2a,
    )


def _check_port(host: str, port: int) -> None:
    """Fail with one line (exit 2) unless ``host:port`` can be listened on, as uvicorn will try next.

    ``SO_REUSEADDR`` as uvicorn sets it: a port left in ``TIME_WAIT`` by a server that just stopped
    is free, a port another process listens on is not.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        _refuse(f"cannot listen on {host}:{port}: {exc.strerror} (is --host right?)")
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            _refuse(f"cannot listen on {host}:{port}: {exc.strerror or exc} (is another process using it? pass --port)")


def _refuse(reason: str) -> NoReturn:
    typer.echo(f"helix-dbos serve: {reason}", err=True)
    raise typer.Exit(2)


def _url_host(host: str) -> str:
    """``host`` as it goes in a URL a person can open (``[::1]``; ``0.0.0.0`` is this machine)."""
    if host in ("0.0.0.0", "::"):
        return "127.0.0.1" if host == "0.0.0.0" else "[::1]"
    return f"[{host}]" if ":" in host else host
