"""A recovered run sees the skills catalog it saw before the crash, even if the files changed since.

A real worker process (``skill_worker.py``) runs an agent with filesystem skills on PostgreSQL
through the real LiteLLM adapter. The scripted model (in this process) holds the run's second LLM
call open; the test SIGKILLs the worker there, edits the skill folders (a new description, a new
skill, a new preloaded body) and starts the worker again. DBOS recovers the run: the
``{agent}.skills.catalog`` step returns its recorded fragment, so the re-sent LLM call carries the
very system prompt of the first one (the files are only read afresh by new tool calls and new runs).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_dbos import SqlSessionStore
from helix_dbos.messages import ToolResultMessage
from helix_dbos.skills import file_system_skill_provider, resolve_skills_catalog
from helix_dbos.testing import ScriptedOpenAIServer
from tests.pg import unique_name
from tests.skills.fixtures import make_skills_root, write_skill_folder
from tests.worker_process import WorkerProcess, start_worker, wait_for_crash_point

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("skill_worker.py")
REPO = Path(__file__).resolve().parents[2]


class Model:
    """``load_skill`` -> (held once) ``read_skill_file`` -> text."""

    def __init__(self) -> None:
        self.held = threading.Event()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        seen = sum(1 for m in body["messages"] if m["role"] == "tool")
        if seen == 0:
            return {"tool_calls": [{"id": "l1", "name": "load_skill", "arguments": {"name": "deploy-runbook"}}]}
        if seen == 1:
            if not self.held.is_set():
                self.held.set()
                return {"text": "slow", "delay_seconds": 30}
            args = {"name": "deploy-runbook", "path": "references/checklist.md", "startLine": 1, "endLine": 1}
            return {"tool_calls": [{"id": "r1", "name": "read_skill_file", "arguments": args}]}
        return {"text": "deployed"}


def _spawn(args: list[str]) -> WorkerProcess:
    return start_worker(WORKER, args)


def test_a_recovered_run_keeps_the_catalog_it_saw_before_the_crash(
    new_migrated_database: Callable[[str], str], tmp_path: Path
) -> None:
    url = new_migrated_database("skills_crash")
    root = make_skills_root(tmp_path / "skills")
    session = f"skills-{unique_name('s')}"
    model = Model()
    with ScriptedOpenAIServer(handler=model) as server:
        args = [url, server.base_url, str(root), session]
        first = _spawn([*args, "--start"])
        try:
            wait_for_crash_point(model.held.is_set, 60, first)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            assert first.returncode == -signal.SIGKILL

            # The skills change while no worker runs.
            write_skill_folder(root, "deploy-runbook", "CHANGED description. Use when never.", "# Deploy runbook v2")
            write_skill_folder(root, "new-skill", "A skill added after the crash. Use when new.", "# New")
            write_skill_folder(root, "pdf-processing", "Extract text from PDFs. Use when PDFs.", "# PDF v2 body")
            changed = asyncio.run(resolve_skills_catalog(file_system_skill_provider([root]), ["pdf-processing"]))
            assert "new-skill" in changed and "CHANGED description" in changed  # a new run would see this

            second = _spawn(args)
            out, _ = second.communicate(timeout=90)
            assert second.returncode == 0, out
            assert "finished completed" in out, out
        finally:
            if first.poll() is None:
                first.kill()
        requests = server.requests

    # Request 1 (before the crash), 2 (held, lost with the worker), 2 again (recovered), 3.
    assert len(requests) == 4
    systems = [r["messages"][0]["content"] for r in requests]
    assert all(s == systems[0] for s in systems), "the recovered run's system prompt changed"
    before = systems[0]
    assert "new-skill" not in before and "CHANGED description" not in before and "PDF v2 body" not in before
    assert "Deploy the service safely." in before and "Use pdftotext." in before

    store = SqlSessionStore(url)
    try:
        state = store.load_state(session)
        assert state is not None and state.status == "completed" and state.output == "deployed"
        results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
        assert [m.tool_call_id for m in results] == ["l1", "r1"]
        # The load before the crash was recorded (v1 body); the read after it is a new tool step.
        assert "# Deploy runbook\\n" in results[0].content and "v2" not in results[0].content
        assert results[1].content == '"check 1\\n"'
    finally:
        store.close()
