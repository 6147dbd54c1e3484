"""``helix-dbos demo``: the demo agent end to end, and the watching that demo and recovery share.

A demo run that a killed demo left in flight is finished first, and reported, so the crash story
of the README (kill -9 a demo, run it again) is told by the demo itself.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from helix_dbos.cli.common import DatabaseUrl, app, compact_json, console, friendly, resolve_url, shown_url
from helix_dbos.cli.render import chunk_markup

if TYPE_CHECKING:
    from helix_dbos.runtime.executor import DBOSAgentExecutor
    from helix_dbos.store.base import RunRecord

__all__ = ["demo", "report_recovered", "watch"]


@app.command()
@friendly
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

    url = resolve_url(database_url)
    agent = build_demo_agent(model or DEMO_MODEL, step_delay_seconds=step_delay)
    router = ModelRouter({DEMO_MODEL: DemoModel(step_delay)}, LiteLLMAdapter())
    console.print(
        f"[bold]helix-dbos demo[/bold]  model=[cyan]{agent.llm_config.model}[/cyan]  "
        f"database=[cyan]{shown_url(url)}[/cyan]",
        soft_wrap=True,
    )
    executor = launch(url, agents=[agent], llm_adapter=router)
    try:
        for run in recovering_runs(executor):
            _finish_recovered(executor, run)
        handle = executor.execute(agent, message)
        console.print(f"session [cyan]{handle.session_id}[/cyan]  run [cyan]{handle.run_id}[/cyan]\n", soft_wrap=True)
        result = asyncio.run(watch(handle))
        console.print()
        style = "green" if result.status == "completed" else "red"
        console.print(f"status: [{style}]{result.status}[/{style}]")
        if result.error:
            console.print(f"error: [red]{result.error}[/red]")
        output = result.output.model_dump() if hasattr(result.output, "model_dump") else result.output
        console.print_json(json.dumps(output))
        state = handle.get_state()
        console.print(
            f"\n{len(state.messages)} messages, {state.step_count} steps, "
            f"custom state: {compact_json(state.custom_state)}",
            markup=False,
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
    result = asyncio.run(watch(AgentExecutionHandle(executor, run, session.agent_type)))
    report_recovered(run, result)
    console.print()


def report_recovered(run: RunRecord, result: Any) -> None:
    """``recovered session ID: STATUS (error)``; ``result`` is an ``AgentResult`` or the run record."""
    style = {"completed": "green", "failed": "red"}.get(result.status, "yellow")
    line = f"[{style}]recovered session {run.session_id}: {result.status}[/{style}]"
    if result.error:
        line += f" ({result.error})"
    console.print(line, soft_wrap=True)


async def watch(handle: Any) -> Any:
    """Print ``handle``'s stream as it comes while waiting for its result; return the result."""
    stream = await handle.stream()

    async def show() -> None:
        if stream is None:
            return
        async for chunk in stream:
            shown = chunk_markup(chunk)
            if shown is not None and chunk.type != "stream_resync":
                console.print(shown[0], end="\n" if shown[1] else "", soft_wrap=True)

    watcher = asyncio.create_task(show())
    result = await handle.result_async()
    try:
        await asyncio.wait_for(watcher, timeout=2)
    except TimeoutError:
        watcher.cancel()
    return result
