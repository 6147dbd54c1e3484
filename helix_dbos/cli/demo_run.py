"""``helix-dbos demo``: the demo agent end to end, and the watching that demo and recovery share.

A demo run that a killed demo left in flight is finished first, and reported, so the crash story
of the README (kill -9 a demo, run it again) is told by the demo itself.

Ctrl-C: the first says which run it waits for and waits at most :data:`_CTRL_C_GRACE_SECONDS` for
it to end (a run that ends in time is reported as usual); past that, or at a second Ctrl-C, the demo
leaves at once, exit code 130, and the run stays in flight exactly as after ``kill -9``: the next
``helix-dbos demo`` (or ``worker --agents demo``) finishes it. Leaving is an immediate process exit
on purpose: the run's workflow thread is busy in a model step or a tool, and Python's exit would
otherwise wait for it (thread pools join their threads at exit), which is the whole run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from helix_dbos.cli.common import DatabaseUrl, app, compact_json, console, friendly, resolve_url, shown_url
from helix_dbos.cli.render import chunk_markup
from helix_dbos.errors import HelixError
from helix_dbos.stream.chunks import ErrorChunk

if TYPE_CHECKING:
    from helix_dbos.runtime.executor import DBOSAgentExecutor
    from helix_dbos.store.base import RunRecord

__all__ = ["demo", "report_recovered", "watch"]

_CTRL_C_GRACE_SECONDS = 5.0
"""How long a first Ctrl-C waits for the run in flight before leaving it to the next start."""


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
    from helix_dbos.cli.model_check import check_agent_models
    from helix_dbos.demo import DEMO_MODEL, DemoModel, build_demo_agent
    from helix_dbos.llm.litellm import LiteLLMAdapter
    from helix_dbos.llm.router import ModelRouter
    from helix_dbos.runtime.launch import launch, recovering_runs, shutdown

    url = resolve_url(database_url)
    agent = build_demo_agent(model or DEMO_MODEL, step_delay_seconds=step_delay)
    check_agent_models([agent])  # before anything is written: a bad model is one line, not a failed session
    router = ModelRouter({DEMO_MODEL: DemoModel(step_delay)}, LiteLLMAdapter())
    # A model call that fails is shown in the run's stream and result; its log line would be a third copy.
    logging.getLogger("helix_dbos.llm").setLevel(logging.CRITICAL)
    console.print(
        f"[bold]helix-dbos demo[/bold]  model=[cyan]{agent.llm_config.model}[/cyan]  "
        f"database=[cyan]{shown_url(url)}[/cyan]",
        soft_wrap=True,
    )
    with _CtrlC() as ctrl_c:
        executor = launch(url, agents=[agent], llm_adapter=router)
        try:
            for run in recovering_runs(executor):
                if ctrl_c.pressed:
                    break
                _finish_recovered(executor, run, ctrl_c)
            if ctrl_c.pressed:
                raise typer.Exit(130)
            handle = executor.execute(agent, message)
            console.print(
                f"session [cyan]{handle.session_id}[/cyan]  run [cyan]{handle.run_id}[/cyan]\n", soft_wrap=True
            )
            shown: list[str] = []
            try:
                result = ctrl_c.wait(handle, shown)
            except HelixError:
                if not shown:
                    raise
                # The run failed and the stream showed why: that line is the report, not one more copy.
                console.print("\nstatus: [red]failed[/red]")
                raise typer.Exit(130 if ctrl_c.pressed else 1) from None
            console.print()
            style = "green" if result.status == "completed" else "red"
            console.print(f"status: [{style}]{result.status}[/{style}]")
            if result.error and not shown:  # an error the stream showed is not printed twice
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
                console.print(
                    f"run {run.run_id}: turn {run.turn}, {run.status}, {run.step_count} steps", soft_wrap=True
                )
            if ctrl_c.pressed:
                raise typer.Exit(130)
            if result.status != "completed":
                raise typer.Exit(1)
        finally:
            shutdown(executor)


class _CtrlC:
    """Ctrl-C during the demo: the first waits (bounded) for the run in flight, the second leaves it.

    Installed only where Ctrl-C would otherwise raise ``KeyboardInterrupt`` (the main thread, SIGINT
    not ignored); a process started with SIGINT ignored keeps ignoring it.
    """

    def __init__(self) -> None:
        self.pressed_at: float | None = None
        self._waiting_for: str | None = None
        self._previous: Any = None

    @property
    def pressed(self) -> bool:
        """Whether Ctrl-C was pressed."""
        return self.pressed_at is not None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._on_ctrl_c)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        if self.pressed_at is not None:
            self.leave()
        self.pressed_at = time.monotonic()
        if self._waiting_for is None:
            _notice("Ctrl-C: stopping (Ctrl-C again to quit at once)")
        else:
            _notice(
                f"Ctrl-C: waiting up to {_CTRL_C_GRACE_SECONDS:g} s for run {self._waiting_for} to finish; "
                "Ctrl-C again leaves it in flight for the next helix-dbos demo to finish"
            )

    def wait(self, handle: Any, errors: list[str] | None = None) -> Any:
        """``handle``'s result, its stream shown meanwhile; leaves the process once Ctrl-C's wait is over.

        The waiting is done by a daemon thread, so that the main thread stays free to take Ctrl-C.
        ``errors`` collects the run-ending errors the stream showed (see :func:`watch`).
        """
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def wait_for_result() -> None:
            try:
                outcome["result"] = asyncio.run(watch(handle, errors=errors))
            except BaseException as exc:  # handed to the main thread, raised there
                outcome["error"] = exc
            finally:
                done.set()

        self._waiting_for = handle.run_id
        threading.Thread(target=wait_for_result, name="helix-demo-wait", daemon=True).start()
        try:
            while not done.wait(0.1):
                if self.pressed_at is not None and time.monotonic() - self.pressed_at >= _CTRL_C_GRACE_SECONDS:
                    self.leave()
        finally:
            self._waiting_for = None
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]

    def leave(self) -> NoReturn:
        """Exit now (130), leaving the run in flight to the next start, as ``kill -9`` would."""
        if self._waiting_for is not None:
            _notice(
                f"left run {self._waiting_for} in flight: the next helix-dbos demo finishes it "
                "(completed steps are not run again)"
            )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


def _notice(text: str) -> None:
    print(f"\n{text}", file=sys.stderr, flush=True)


def _finish_recovered(executor: DBOSAgentExecutor, run: RunRecord, ctrl_c: _CtrlC) -> None:
    """Show a recovered demo run's stream from its start while it finishes, then how it ended."""
    from helix_dbos.runtime.handle import AgentExecutionHandle

    session = executor.reads.get_session(run.session_id)
    if session is None or executor.registry.get(session.agent_type) is None:
        return  # not a demo run: a worker with its agent will finish it
    console.print(
        f"[bold yellow]↻ recovering session {run.session_id}[/bold yellow]: its run {run.run_id} was in flight "
        "when the process running it died; finishing it (completed steps are not run again)",
        soft_wrap=True,
    )
    result = ctrl_c.wait(AgentExecutionHandle(executor, run, session.agent_type))
    report_recovered(run, result)
    console.print()


def report_recovered(run: RunRecord, result: Any) -> None:
    """``recovered session ID: STATUS (error)``; ``result`` is an ``AgentResult`` or the run record."""
    style = {"completed": "green", "failed": "red"}.get(result.status, "yellow")
    line = f"[{style}]recovered session {run.session_id}: {result.status}[/{style}]"
    if result.error:
        line += f" ({result.error})"
    console.print(line, soft_wrap=True)


async def watch(handle: Any, *, errors: list[str] | None = None) -> Any:
    """Print ``handle``'s stream as it comes while waiting for its result; return the result.

    The run-ending errors printed are appended to ``errors``, so the caller need not print them again.
    """
    stream = await handle.stream()

    async def show() -> None:
        if stream is None:
            return
        inline = False  # the last thing printed was text, so the cursor is not at a line's start
        async for chunk in stream:
            shown = chunk_markup(chunk)
            if shown is None or chunk.type == "stream_resync":
                continue
            markup, ends_line = shown
            if ends_line and not inline:
                markup = markup.removeprefix("\n")
            try:
                console.print(markup, end="\n" if ends_line else "", soft_wrap=True)
            except SystemExit:  # rich's answer to a closed stdout (| head): stop showing, let the run end
                return
            inline = not ends_line
            if errors is not None and isinstance(chunk, ErrorChunk) and not chunk.recoverable:
                errors.append(chunk.error)
        if inline:
            console.print()

    watcher = asyncio.create_task(show())
    result = await handle.result_async()
    try:
        await asyncio.wait_for(watcher, timeout=2)
    except TimeoutError:
        watcher.cancel()
    return result
