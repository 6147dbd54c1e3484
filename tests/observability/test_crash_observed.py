"""A SIGKILLed worker's run, recovered by ``helix-dbos worker``, continues its trace and its logs.

Two real processes on PostgreSQL, the real LiteLLM adapter against the scripted OpenAI-compatible
server in this process. The first (``obs_worker.py``) starts a run and is killed inside the second
step's slow tool; the second is the CLI worker with the same executor id, which recovers it. Both
write every span to one file as it ends, and print lifecycle logs on stderr.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.observability import session_trace_id
from helix_dbos.testing import ScriptedOpenAIServer
from tests.cli_process import REPO, CliProcess, cli_env
from tests.observability.spans import read_span_file, tree
from tests.pg import unique_name
from tests.worker_process import start_worker

pytestmark = pytest.mark.postgres


def model(body: dict[str, Any]) -> dict[str, Any]:
    seen = sum(1 for m in body["messages"] if m["role"] == "tool")
    if seen == 0:
        return {"tool_calls": [{"id": "a1", "name": "append_line", "arguments": {"text": "one"}}]}
    if seen == 1:
        return {"tool_calls": [{"id": "a2", "name": "slow_append", "arguments": {"text": "two"}}]}
    return {"tool_calls": [{"id": "a3", "name": "submit", "arguments": {"answer": "done"}}]}


def test_a_recovered_run_continues_its_trace_and_logs_its_recovery(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    url = new_migrated_database("obs")
    session = f"obs-{unique_name('s')}"
    effects, span_file = tmp_path / "effects.txt", tmp_path / "spans.jsonl"
    server = ScriptedOpenAIServer(handler=model)
    env = cli_env(
        HELIX_TEST_LLM_URL=server.start(),
        HELIX_TEST_EFFECTS=str(effects),
        HELIX_TEST_SPAN_FILE=str(span_file),
        HELIX_LOG_LEVEL="INFO",
    )
    first = start_worker(Path(__file__).with_name("obs_worker.py"), [url, session], env=env)
    worker: CliProcess | None = None
    store = SqlSessionStore(url)
    try:
        deadline = time.time() + 60
        while not (effects.exists() and "start:two" in effects.read_text()):
            assert time.time() < deadline and first.poll() is None, "the first worker never reached its slow tool"
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first_out, _ = first.communicate(timeout=10)

        worker = CliProcess(
            REPO,
            "worker",
            "--agents",
            "tests.observability.obs_agents:agents",
            "--database-url",
            url,
            "--executor-id",
            "obs-worker",
            env=env,
        )
        deadline = time.time() + 60
        while (state := store.load_session(session)) is None or state.status != "completed":
            assert time.time() < deadline, worker.output
            time.sleep(0.1)
        worker.wait_for(r"run completed: session=" + re.escape(session))
        worker.process.send_signal(signal.SIGTERM)
        worker.process.wait(30)
        second_out = worker.output
    finally:
        if first.poll() is None:
            first.kill()
        if worker is not None and worker.process.poll() is None:
            worker.process.kill()
        store.close()
        server.stop()

    run_id = f"{session}-turn-1"
    # Logs: the first process started the run and committed step 1; the CLI worker says it recovered
    # the run (and which executor it is), then commits steps 2 and 3 and completes. No step twice.
    assert f"run started: session={session} run={run_id}" in first_out, first_out
    recovered = rf"run recovered: session={session} run={run_id} .*executor_id=obs-worker replayed_steps=2"
    assert re.search(recovered, second_out), second_out
    assert f"run started: session={session}" not in second_out
    committed = re.findall(rf"step committed: session={session} run={run_id} step=(\d+)", first_out + second_out)
    assert sorted(committed) == ["1", "2", "3"], (first_out, second_out)
    assert re.findall(r"step=(\d+)", "\n".join(x for x in first_out.splitlines() if "step committed" in x)) == ["1"]
    assert f"run completed: session={session} run={run_id}" in second_out

    # Spans: every one in the session's trace; each model call once; the recovered run span marked.
    spans = read_span_file(span_file)
    shown = tree(spans)
    assert {s["trace_id"] for s in spans} == {session_trace_id(session)}, shown
    (run,) = [s for s in spans if s["name"].startswith("invoke_agent")]  # the killed one never ended
    assert run["attributes"]["helix.recovered"] is True and run["attributes"]["helix.status"] == "completed", shown
    assert "helix.recovered" in run["events"]
    chats = sorted(s["attributes"]["helix.step"] for s in spans if s["name"].startswith("chat "))
    assert chats == [1, 2, 3], shown
    tools = sorted(s["attributes"]["gen_ai.tool.call.id"] for s in spans if s["name"].startswith("execute_tool"))
    assert tools == ["a1", "a2", "a3"], shown  # a2's killed attempt never ended; its re-execution did
    steps = sorted(s["attributes"]["helix.step"] for s in spans if s["name"].startswith("step "))
    assert steps == [1, 2, 3], shown
    step1 = next(s for s in spans if s["name"] == "step 1")
    assert step1["parent_id"] != run["span_id"]  # step 1's parent is the dead process's run span (never exported)
    assert {s["parent_id"] for s in spans if s["name"] in ("step 2", "step 3")} == {run["span_id"]}
    assert os.path.getsize(span_file) > 0
