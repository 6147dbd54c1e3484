"""Tools that must not run twice, killed mid-call (real processes, PostgreSQL, the LiteLLM client).

A worker (``unsafe_tool_worker.py``) runs the charging agent; its ``charge`` tool writes ``start``
to a file and blocks on its first call, and the test SIGKILLs the worker there. A second worker
recovers the run. For a ``retry_safe=False`` tool the recovered run does not run the tool again:
it records the outcome as unknown and parks on an operator's re-run approval (the default), which
this process answers over HTTP (approve: the tool runs exactly once more) or directly (deny: the
model gets the "outcome unknown" result). A retry-safe tool in the same spot runs again (DBOS's
at-least-once, pinned). This process is a DBOS process of the app too, with the same agent: DBOS
may hand the recovered workflow to it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from dbos import DBOS

from helix_dbos import LiteLLMAdapter
from helix_dbos.messages import ToolResultMessage
from helix_dbos.service import create_app
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.runtime.unsafe_tool_agents import charging_agent, model
from tests.worker_process import WorkerProcess, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("unsafe_tool_worker.py")


def _effects(path: Path) -> collections.Counter[str]:
    return collections.Counter(path.read_text().splitlines()) if path.exists() else collections.Counter()


def _wait_for(condition: Callable[[], bool], what: str, proc: WorkerProcess, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            raise AssertionError(f"worker exited while waiting for {what}: {proc.output}")
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Crash:
    """Start a run in one worker, SIGKILL it while ``charge`` runs, recover it in a second worker."""

    def __init__(
        self, url: str, tmp_path: Path, *, retry_safe: bool, flags: tuple[str, ...] = (), handler: Any = model
    ) -> None:
        self.url = url
        self.effects = tmp_path / "effects.txt"
        self.session = f"unsafe-{unique_name('s')}"
        self.retry_safe = retry_safe
        self.flags = list(flags)
        self.server = ScriptedOpenAIServer(handler=handler)
        self.base_url = self.server.start()
        self.procs: list[WorkerProcess] = []

    def agent(self) -> Any:
        return charging_agent(
            self.base_url,
            self.effects,
            retry_safe=self.retry_safe,
            unknown_outcome="report" if "--report" in self.flags else None,
            block="--no-block" not in self.flags,
        )

    def spawn(self, *, start: bool, retry_safe: bool | None = None) -> WorkerProcess:
        args = [self.url, self.base_url, str(self.effects), self.session, *self.flags]
        args += ["--start"] if start else []
        args += ["--retry-safe"] if (self.retry_safe if retry_safe is None else retry_safe) else []
        proc = start_worker(WORKER, args)
        self.procs.append(proc)
        return proc

    def kill_mid_call_and_recover(self) -> WorkerProcess:
        first = self.spawn(start=True)
        _wait_for(lambda: _effects(self.effects)["start"] == 1, "the charge to start", first)
        kill(first)
        return self.spawn(start=False)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        self.server.stop()


def kill(worker: WorkerProcess) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    assert worker.returncode == -signal.SIGKILL


def _finish(worker: WorkerProcess) -> str:
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0 and "finished completed" in out, out
    return out


def _charge_result(executor: Any, session: str) -> ToolResultMessage:
    state = executor.store.load_state(session)
    assert state is not None and state.status == "completed"
    [result] = [m for m in state.messages if isinstance(m, ToolResultMessage) and m.tool_call_id == "c1"]
    return result


def _wait_for_rerun_request(executor: Any, crash: Crash, worker: WorkerProcess) -> None:
    def asked() -> bool:
        pending = executor.list_pending_tool_calls(crash.session)
        return [(c.tool_call_id, c.kind) for c in pending] == [("c1", "rerun")]

    _wait_for(asked, "the re-run approval", worker)


def test_a_retry_safe_tool_killed_mid_call_runs_again(runtime_db: str, make_executor: Any, tmp_path: Path) -> None:
    """Today's behaviour, pinned: the recovered run executes the in-flight tool step again."""
    crash = Crash(runtime_db, tmp_path, retry_safe=True)
    try:
        make_executor(LiteLLMAdapter(), [crash.agent()])
        _finish(crash.kill_mid_call_and_recover())
    finally:
        crash.close()
    assert _effects(crash.effects) == {"start": 2, "done": 1}


def test_a_not_retry_safe_tool_killed_mid_call_waits_for_an_approved_rerun_over_http(
    runtime_db: str, make_executor: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The recovered run records the outcome as unknown (ERROR log) and parks on a ``rerun`` approval,
    listed and answered through the service; approved, the tool runs exactly once more."""
    crash = Crash(runtime_db, tmp_path, retry_safe=False)
    try:
        executor = make_executor(LiteLLMAdapter(), [crash.agent()])
        second = crash.kill_mid_call_and_recover()
        _wait_for_rerun_request(executor, crash, second)
        assert _effects(crash.effects) == {"start": 1}  # recovery did not run it again

        async def approve_over_http() -> None:
            app = create_app(executor, allow_unauthenticated=True)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
                snapshot = (await client.get(f"/v1/sessions/{crash.session}")).json()
                [pending] = snapshot["pending_tool_calls"]
                assert (pending["tool_call_id"], pending["tool_name"], pending["kind"]) == ("c1", "charge", "rerun")
                answer = {
                    "kind": "approval-response",
                    "tool_call_id": "c1",
                    "approved": True,
                    "arguments_digest": pending["arguments_digest"],
                }
                response = await client.post(f"/v1/sessions/{crash.session}/tool-results", json=answer)
                assert response.status_code == 202, response.text

        asyncio.run(approve_over_http())
        out = _finish(second)
    finally:
        crash.close()
    assert _effects(crash.effects) == {"start": 2, "done": 1}  # the approved re-run ran exactly once
    result = _charge_result(executor, crash.session)
    assert '"charged":42' in result.content.replace(" ", "")
    [run] = executor.store.list_runs(crash.session)
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(run.run_id)]
    tool_steps = [name for name in steps if name.startswith("charging-agent.tool")]
    # The marker, the step that found the call in flight, then the approved re-run behind its own marker.
    assert tool_steps == ["charging-agent.tool_starts", "charging-agent.tool.charge"] * 2, steps
    # Logged once at ERROR, by whichever process recovered the run (both take from the run queue).
    logged = [r.levelno for r in caplog.records if getattr(r, "event", None) == "tool.outcome_unknown"]
    printed = [line for line in out.splitlines() if "tool.outcome_unknown" in line]
    assert len(logged) + len(printed) == 1 and all(" ERROR " in line for line in printed), (out, logged)
    assert logged in ([], [logging.ERROR])


def test_a_denied_rerun_gives_the_model_the_unknown_outcome_with_the_idempotency_key(
    runtime_db: str, make_executor: Any, tmp_path: Path
) -> None:
    """Denied, the call keeps its "outcome unknown" result: the model (and the transcript) get it."""
    crash = Crash(runtime_db, tmp_path, retry_safe=False)
    try:
        executor = make_executor(LiteLLMAdapter(), [crash.agent()])
        second = crash.kill_mid_call_and_recover()
        _wait_for_rerun_request(executor, crash, second)
        executor.submit_tool_result(
            crash.session, {"kind": "approval-response", "tool_call_id": "c1", "approved": False}
        )
        _finish(second)
    finally:
        crash.close()
    assert _effects(crash.effects) == {"start": 1}  # ran once, never again
    result = _charge_result(executor, crash.session)
    assert result.content.startswith("Outcome unknown")
    assert f"idempotency_key={crash.session}:c1" in result.content
    assert result.metadata is not None and result.metadata["outcome_unknown"] is True
    assert result.metadata["idempotency_key"] == f"{crash.session}:c1"
    state = executor.store.load_state(crash.session)
    assert state is not None and state.output == {"answer": result.content}  # what the model was given


def test_report_gives_the_model_the_unknown_outcome_without_waiting(
    runtime_db: str, make_executor: Any, tmp_path: Path
) -> None:
    """``unknown_outcome="report"``: no approval; the recovered run goes on with the unknown outcome."""
    crash = Crash(runtime_db, tmp_path, retry_safe=False, flags=("--report",))
    try:
        executor = make_executor(LiteLLMAdapter(), [crash.agent()])
        _finish(crash.kill_mid_call_and_recover())
    finally:
        crash.close()
    assert _effects(crash.effects) == {"start": 1}
    assert executor.list_pending_tool_calls(crash.session) == []
    assert _charge_result(executor, crash.session).content.startswith("Outcome unknown")


class HoldOnce:
    """The scripted model, hanging once on the call after the charge (the worker is killed there)."""

    def __init__(self) -> None:
        self.held = False

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        hold = not self.held and any(m["role"] == "tool" for m in body["messages"])
        self.held = self.held or hold
        return model(body, hold_after_the_charge=hold)


def test_a_run_recorded_before_its_tool_became_not_retry_safe_replays_its_tool_step(
    runtime_db: str, make_executor: Any, tmp_path: Path
) -> None:
    """The replay patch: a run whose charge step was recorded by a worker where the tool was retry-safe
    is recovered by a worker where it is not; it replays the recorded step (no marker step where
    that step was recorded, which DBOS would refuse) and the tool does not run again."""
    crash = Crash(runtime_db, tmp_path, retry_safe=False, flags=("--no-block",), handler=HoldOnce())
    try:
        executor = make_executor(LiteLLMAdapter(), [crash.agent()])
        first = crash.spawn(start=True, retry_safe=True)
        _wait_for(lambda: crash.server.request_count == 2, "the model call after the charge", first)
        kill(first)
        _finish(crash.spawn(start=False))
    finally:
        crash.close()
    assert _effects(crash.effects) == {"start": 1, "done": 1}
    assert '"charged":42' in _charge_result(executor, crash.session).content.replace(" ", "")
    [run] = executor.store.list_runs(crash.session)
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(run.run_id)]
    assert "charging-agent.tool_starts" not in steps, steps
