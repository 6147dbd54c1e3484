"""Crash recovery with real processes: SIGKILL a worker mid-run, restart it, check exactly-once.

The worker (``crash_worker.py``) runs on PostgreSQL and calls a scripted OpenAI-compatible server
through the real LiteLLM adapter; the server lives in this test process, so it counts every LLM
request across both worker processes. Tools write their side effects to a file.

The scripted model answers by how many tool results it has seen, so a re-executed LLM call gets
the same answer: ``append_line(one)`` -> ``slow_append(two)`` -> ``submit(done)`` (a finish_with tool).
"""

from __future__ import annotations

import asyncio
import collections
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.messages import AssistantMessage, ToolResultMessage
from helix_dbos.orchestration.message_builder import find_unpaired_tool_call_ids
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.worker_process import WorkerProcess, start_worker

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("crash_worker.py")
REPO = Path(__file__).resolve().parents[2]
BASELINE_LLM_CALLS = 3


class Model:
    """Scripted model; optionally holds one request open so the test can kill the worker mid-call."""

    def __init__(self, hold_at_tool_results: int | None = None) -> None:
        self.hold_at = hold_at_tool_results
        self.held = threading.Event()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        seen = sum(1 for m in body["messages"] if m["role"] == "tool")
        if self.hold_at is not None and seen == self.hold_at and not self.held.is_set():
            self.held.set()
            return {"text": "slow", "delay_seconds": 30}
        if seen == 0:
            return {"tool_calls": [{"id": "a1", "name": "append_line", "arguments": {"text": "one"}}]}
        if seen == 1:
            return {"tool_calls": [{"id": "a2", "name": "slow_append", "arguments": {"text": "two"}}]}
        return {"tool_calls": [{"id": "a3", "name": "submit", "arguments": {"answer": "done"}}]}


@pytest.fixture
def crash_env(new_migrated_database: Callable[[str], str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    url = new_migrated_database("crash")
    yield {"url": url, "effects": tmp_path / "effects.txt", "session": f"crash-{unique_name('s')}"}


def _spawn(env: dict[str, Any], base_url: str, *, start: bool, extra: list[str] | None = None) -> WorkerProcess:
    args = [env["url"], base_url, str(env["effects"]), env["session"], *(extra or [])]
    if start:
        args.append("--start")
    return start_worker(WORKER, args)


def _wait_for(condition: Callable[[], bool], timeout: float, what: str, proc: WorkerProcess) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            raise AssertionError(
                f"worker exited early while waiting for {what}: {proc.stdout.read() if proc.stdout else ''}"
            )
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _effects(env: dict[str, Any]) -> collections.Counter[str]:
    path: Path = env["effects"]
    return collections.Counter(path.read_text().splitlines()) if path.exists() else collections.Counter()


def _crash_and_recover(
    env: dict[str, Any],
    model: Callable[[dict[str, Any]], dict[str, Any]],
    kill_when: Callable[[ScriptedOpenAIServer], bool],
    extra: list[str] | None = None,
) -> ScriptedOpenAIServer:
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    first = _spawn(env, base_url, start=True, extra=extra)
    try:
        _wait_for(lambda: kill_when(server), 60, "the crash point", first)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert first.returncode == -signal.SIGKILL
        second = _spawn(env, base_url, start=False, extra=extra)
        out, _ = second.communicate(timeout=90)
        assert second.returncode == 0, out
        assert "finished completed" in out, out
    finally:
        for proc in (first,):
            if proc.poll() is None:
                proc.kill()
        server.stop()
    return server


def _check_transcript(env: dict[str, Any]) -> None:
    store = SqlSessionStore(env["url"])
    try:
        state = store.load_state(env["session"])
        assert state is not None
        assert state.status == "completed"
        assert state.output == {"answer": "done"}
        assert find_unpaired_tool_call_ids(state.messages) == []  # no dangling tool call
        results = [m.tool_call_id for m in state.messages if isinstance(m, ToolResultMessage)]
        assert results == ["a1", "a2", "a3"]  # no duplicated message
        assert sum(isinstance(m, AssistantMessage) for m in state.messages) == BASELINE_LLM_CALLS
        runs = store.list_runs(env["session"])
        assert [(r.turn, r.status) for r in runs] == [(1, "completed")]
    finally:
        store.close()


def test_kill_during_a_tool_after_a_side_effect(crash_env: dict[str, Any]) -> None:
    server = _crash_and_recover(crash_env, Model(), lambda s: _effects(crash_env)["start:two"] >= 1)
    effects = _effects(crash_env)
    assert effects["append:one"] == 1  # the completed tool step did not run again
    assert effects["append:two"] == 1 and effects["start:two"] == 2  # the in-flight step ran again, once
    assert effects["submit:done"] == 1
    assert server.request_count == BASELINE_LLM_CALLS  # no LLM call repeated
    _check_transcript(crash_env)


class PrimaryDown:
    """A model chain whose primary always answers 500: every step is answered by the fallback."""

    def __init__(self) -> None:
        self.backup = Model()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["model"] == "primary":
            return {"status": 500, "error_message": "primary down"}
        return self.backup(body)


def test_kill_after_the_fallback_answered_replays_without_calling_a_model(crash_env: dict[str, Any]) -> None:
    """The fallback's answer is the recorded step: recovery re-runs the interrupted tool, not the chain."""
    server = _crash_and_recover(
        crash_env, PrimaryDown(), lambda s: _effects(crash_env)["start:two"] >= 1, extra=["--fallback"]
    )
    effects = _effects(crash_env)
    assert effects["append:one"] == 1 and effects["append:two"] == 1 and effects["submit:done"] == 1
    # Per step (told apart by the tool results it sends): primary twice (its two attempts), then the
    # backup once; the two steps recorded before the kill were not called again after it.
    by_step = collections.Counter(
        (sum(m["role"] == "tool" for m in body["messages"]), body["model"]) for body in server.requests
    )
    assert by_step == {(n, model): count for n in range(3) for model, count in (("primary", 2), ("backup", 1))}
    _check_transcript(crash_env)


def test_kill_while_the_llm_step_is_in_flight(crash_env: dict[str, Any]) -> None:
    model = Model(hold_at_tool_results=1)
    server = _crash_and_recover(crash_env, model, lambda s: model.held.is_set())
    effects = _effects(crash_env)
    assert effects["append:one"] == 1 and effects["append:two"] == 1 and effects["submit:done"] == 1
    # The in-flight LLM call is the one step that runs again: at-least-once, exactly one extra request.
    assert server.request_count == BASELINE_LLM_CALLS + 1
    _check_transcript(crash_env)


def test_kill_while_a_finish_with_tool_runs(crash_env: dict[str, Any]) -> None:
    server = _crash_and_recover(crash_env, Model(), lambda s: _effects(crash_env)["start:submit:done"] >= 1)
    effects = _effects(crash_env)
    assert effects["append:one"] == 1 and effects["append:two"] == 1
    assert effects["submit:done"] == 1 and effects["start:submit:done"] == 2
    assert server.request_count == BASELINE_LLM_CALLS
    _check_transcript(crash_env)


def test_kill_while_waiting_for_a_client_then_submit_after_restart(
    runtime_db: str, make_executor: Any, tmp_path: Path
) -> None:
    """The worker dies while its run waits in DBOS.recv; the restarted worker waits again, and a
    submission from another process (this one) wakes it."""

    def model(body: dict[str, Any]) -> dict[str, Any]:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return {"tool_calls": [{"id": "loc1", "name": "get_location", "arguments": {"text": "?"}}]}
        return {"tool_calls": [{"id": "fin", "name": "__finish__", "arguments": {"answer": results[0]["content"]}}]}

    from helix_dbos import LiteLLMAdapter
    from tests.runtime.crash_agents import hitl_agent

    env = {"url": runtime_db, "effects": tmp_path / "effects.txt", "session": f"hitl-crash-{unique_name('s')}"}
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    # This process submits; like any process of the app it registers the agents, since DBOS may hand
    # the recovered workflow to any live process on the system database.
    submitter = make_executor(LiteLLMAdapter(), [hitl_agent(base_url)])
    first = _spawn(env, base_url, start=True, extra=["--hitl"])
    second = None
    try:
        _wait_for(
            lambda: [c.tool_call_id for c in submitter.list_pending_tool_calls(env["session"])] == ["loc1"],
            60,
            "the pending call",
            first,
        )
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        second = _spawn(env, base_url, start=False, extra=["--hitl"])
        time.sleep(2.5)  # recovery re-enters the workflow about 1 s after launch, then waits again
        submitter.submit_tool_result(
            env["session"], {"kind": "client-tool-result", "tool_call_id": "loc1", "result": "Oslo"}
        )
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 0 and "finished completed" in out, out  # the session completed
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
        server.stop()
    state = submitter.store.load_state(env["session"])
    assert state is not None and state.output == {"answer": '"Oslo"'}
    assert find_unpaired_tool_call_ids(state.messages) == []
    assert server.request_count == 2  # the LLM step before the wait was not repeated by the recovery
    assert [(r.turn, r.status) for r in submitter.store.list_runs(env["session"])] == [(1, "completed")]


def test_three_workers_one_killed_for_good_its_run_is_taken_over(crash_env: dict[str, Any]) -> None:
    """Worker A runs the session and dies, never to return; B and C notice its heartbeat stopped,
    one of them re-enqueues A's runs, and the run completes with no completed step repeated."""
    server = ScriptedOpenAIServer(handler=Model())
    base_url = server.start()
    common = ["--takeover-after=2"]
    a = _spawn(crash_env, base_url, start=True, extra=["--executor-id=worker-a", *common])
    others: list[WorkerProcess] = []
    try:
        _wait_for(lambda: _effects(crash_env)["start:two"] >= 1, 60, "worker A inside slow_append", a)
        others = [_spawn(crash_env, base_url, start=False, extra=[f"--executor-id=worker-{n}", *common]) for n in "bc"]
        a.send_signal(signal.SIGKILL)  # and never restart it
        a.wait(10)
        outputs = [p.communicate(timeout=90)[0] for p in others]
        assert all(p.returncode == 0 and "finished completed" in out for p, out in zip(others, outputs, strict=True)), (
            outputs
        )
    finally:
        for proc in (a, *others):
            if proc.poll() is None:
                proc.kill()
        server.stop()
    effects = _effects(crash_env)
    assert effects["append:one"] == 1 and effects["append:two"] == 1 and effects["submit:done"] == 1
    assert server.request_count == BASELINE_LLM_CALLS
    _check_transcript(crash_env)
    store = SqlSessionStore(crash_env["url"])
    try:
        workers = {w.executor_id: w for w in store.workers.list_workers()}
        assert workers["worker-a"].recovered_by in ("worker-b", "worker-c")
    finally:
        store.close()


FINAL_TEXT = "Durable agents finish what they start, even when a worker dies mid-sentence."


def test_kill_during_a_streamed_llm_step_reader_sees_resync_and_final_text_once(crash_env: dict[str, Any]) -> None:
    from helix_dbos import collect_text
    from helix_dbos.stream.chunks import StreamResyncChunk, TextDeltaChunk
    from helix_dbos.stream.sql import SqlStreamManager

    calls = {"n": 0}

    def model(body: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:  # the first attempt streams slowly and is killed mid-way
            return {"text": FINAL_TEXT, "chunk_delay_seconds": 1.0}
        return {"text": FINAL_TEXT}

    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    manager = SqlStreamManager(crash_env["url"])

    async def deltas() -> int:
        records = await manager.read_records(crash_env["session"])
        return sum(isinstance(r.chunk, TextDeltaChunk) for r in records)

    first = _spawn(crash_env, base_url, start=True, extra=["--text"])
    second = None
    try:
        _wait_for(lambda: asyncio.run(deltas()) >= 1, 60, "a streamed delta", first)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        second = _spawn(crash_env, base_url, start=False, extra=["--text"])
        out, _ = second.communicate(timeout=90)
        assert second.returncode == 0 and "finished completed" in out, out

        async def read_all() -> list[Any]:
            stream = await manager.create_reader(crash_env["session"])
            assert stream is not None
            return [chunk async for chunk in stream]

        chunks = asyncio.run(read_all())
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
        server.stop()
        manager.close()
    resyncs = [c for c in chunks if isinstance(c, StreamResyncChunk)]
    assert len(resyncs) == 1 and resyncs[0].reason == "crash_recovery" and resyncs[0].step == 1
    raw = "".join(c.content for c in chunks if isinstance(c, TextDeltaChunk))
    assert raw != FINAL_TEXT and raw.endswith(FINAL_TEXT)  # the dead attempt's text is there, then resynced

    async def replay() -> str:
        async def gen() -> Any:
            for c in chunks:
                yield c

        return await collect_text(gen())

    assert asyncio.run(replay()) == FINAL_TEXT  # the final text, once
    assert chunks[-1].type == "output"
