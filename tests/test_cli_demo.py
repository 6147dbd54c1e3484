"""``helix-dbos demo`` as a person meets it: Ctrl-C mid-run, a model it cannot run, what it prints.

Ctrl-C is sent the way a terminal sends it: SIGINT to the process group of a demo started in a
session of its own, with SIGINT at its default disposition (a child of a non-interactive shell's
``&`` ignores SIGINT, which would make these tests pass for nothing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_dbos.store import SqlSessionStore
from tests.cli_process import CliProcess, cli_env
from tests.test_cli import SESSION_LINE, _assert_completed_once

GRACE_SECONDS = 5.0
"""How long a first Ctrl-C waits for the run in flight (``demo_run._CTRL_C_GRACE_SECONDS``)."""


class InterruptibleCli(CliProcess):
    """A CLI process in a session of its own, SIGINT at its default, so ``interrupt()`` is a Ctrl-C."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.args = args
        self.lines: list[str] = []
        import queue
        import threading

        self._queue: queue.Queue[str | None] = queue.Queue()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "helix_dbos.cli", *args],
            cwd=cwd,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def interrupt(self) -> float:
        """Ctrl-C (SIGINT to the process group); returns when it was sent."""
        os.killpg(self.process.pid, signal.SIGINT)
        return time.monotonic()

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def _session_status(tmp_path: Path, session_id: str) -> str:
    store = SqlSessionStore(f"sqlite:///{tmp_path / '.helix' / 'helix.sqlite'}")
    try:
        session = store.load_session(session_id)
        assert session is not None
        return session.status
    finally:
        store.close()


def _assert_next_demo_recovers(tmp_path: Path, session_id: str) -> None:
    again = CliProcess(tmp_path, "demo")
    assert again.wait() == 0, again.output
    assert f"recovering session {session_id}" in again.output, again.output
    assert f"recovered session {session_id}: completed" in again.output, again.output
    _assert_completed_once(tmp_path, session_id)


def _assert_clean(output: str) -> None:
    assert "Traceback" not in output and "Exception ignored" not in output, output
    assert "KeyboardInterrupt" not in output and "Aborted" not in output, output


def test_a_first_ctrl_c_says_what_it_waits_for_then_leaves_the_run_to_the_next_demo(tmp_path: Path) -> None:
    demo = InterruptibleCli(tmp_path, "demo", "--step-delay", "2")
    try:
        session_id = demo.wait_for(SESSION_LINE).group(1)
        demo.wait_for(r"→ get_weather")  # the first tool batch is in flight; the run needs ~8 s more
        sent = demo.interrupt()
        notice = demo.wait_for(r"Ctrl-C", timeout=2).string
        code = demo.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        demo.close()
    print(f"first Ctrl-C to exit: {took:.2f} s")
    assert "waiting up to" in notice and "Ctrl-C again" in notice and "next helix-dbos demo" in notice, notice
    assert code == 130, demo.output
    assert took < GRACE_SECONDS + 3, (took, demo.output)
    assert "left run" in demo.output and "status:" not in demo.output, demo.output
    _assert_clean(demo.output)
    assert _session_status(tmp_path, session_id) == "active"  # left in flight, not failed
    _assert_next_demo_recovers(tmp_path, session_id)


def test_a_second_ctrl_c_leaves_at_once_and_the_next_demo_finishes_the_run(tmp_path: Path) -> None:
    demo = InterruptibleCli(tmp_path, "demo", "--step-delay", "2")
    try:
        session_id = demo.wait_for(SESSION_LINE).group(1)
        demo.wait_for(r"→ get_weather")
        demo.interrupt()
        demo.wait_for(r"Ctrl-C", timeout=2)
        sent = demo.interrupt()
        code = demo.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        demo.close()
    print(f"second Ctrl-C to exit: {took:.2f} s")
    assert code == 130, demo.output
    assert took < 1.5, (took, demo.output)
    _assert_clean(demo.output)
    assert _session_status(tmp_path, session_id) == "active"
    _assert_next_demo_recovers(tmp_path, session_id)


def test_a_run_that_ends_while_ctrl_c_waits_is_reported(tmp_path: Path) -> None:
    demo = InterruptibleCli(tmp_path, "demo", "--step-delay", "2")
    try:
        session_id = demo.wait_for(SESSION_LINE).group(1)
        demo.wait_for(r"← save_note")  # the last model step (2 s) is all that is left
        sent = demo.interrupt()
        code = demo.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        demo.close()
    assert code == 130, demo.output
    assert took < GRACE_SECONDS + 3, (took, demo.output)
    assert "status: completed" in demo.output and "warmest_city" in demo.output, demo.output
    _assert_clean(demo.output)
    assert _session_status(tmp_path, session_id) == "completed"


# --- a model the demo (or a worker) cannot run is one line, before anything is written -----------------

_HIDE_LITELLM = """
import sys
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("litellm", "openai", "mcp"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Missing())
"""


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "helix_dbos.cli", *args],
        cwd=tmp_path,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_one_line_and_nothing_written(proc: subprocess.CompletedProcess[str], tmp_path: Path, code: int) -> str:
    assert proc.returncode == code, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and line.startswith("helix-dbos: "), proc.stderr
    assert proc.stdout == "", proc.stdout
    assert not (tmp_path / ".helix").exists(), "no database, so no session, may be created"
    return line


def test_a_model_that_needs_the_missing_litellm_extra_is_one_line(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(_HIDE_LITELLM)
    env = cli_env()
    env["PYTHONPATH"] = f"{hide}{os.pathsep}{env['PYTHONPATH']}"
    work = tmp_path / "work"
    work.mkdir()
    proc = _run(work, "demo", "--model", "openai/gpt-4o-mini", env=env)
    line = _assert_one_line_and_nothing_written(proc, work, 1)
    assert "pip install 'helix-dbos[litellm]'" in line, line


@pytest.mark.parametrize(
    ("model", "suggestion"),
    [
        ("opnai/gpt-4o-mini", "openai/gpt-4o-mini"),
        ("gpt4o-mini", "openai/gpt-4o-mini"),
        ("helix/demo-scripte", "helix/demo-scripted"),
    ],
)
def test_a_mistyped_model_is_one_line_with_similar_names(tmp_path: Path, model: str, suggestion: str) -> None:
    line = _assert_one_line_and_nothing_written(_run(tmp_path, "demo", "--model", model), tmp_path, 2)
    assert f"unknown model {model!r}" in line and suggestion in line, line
    assert "rejected" not in line, line


def test_a_missing_api_key_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in cli_env().items() if k != "OPENAI_API_KEY"}
    line = _assert_one_line_and_nothing_written(
        _run(tmp_path, "demo", "--model", "openai/gpt-4o-mini", env=env), tmp_path, 1
    )
    assert "OPENAI_API_KEY" in line, line


def test_a_worker_checks_its_agents_models_at_start_up(tmp_path: Path) -> None:
    (tmp_path / "typo_agents.py").write_text(
        "from helix_dbos import define_agent\n"
        "agents = [define_agent('typo', system_prompt='Hi.', llm_config='opnai/gpt-4o-mini')]\n"
    )
    line = _assert_one_line_and_nothing_written(_run(tmp_path, "worker", "--agents", "typo_agents"), tmp_path, 2)
    assert "agent 'typo': unknown model 'opnai/gpt-4o-mini'" in line and "openai/gpt-4o-mini" in line, line


# --- what the demo prints ----------------------------------------------------------------------------


def test_the_demo_output_is_tidy_and_honest_about_cities_it_does_not_know(tmp_path: Path) -> None:
    proc = _run(tmp_path, "demo", "--message", "Compare the weather in Paris, Lima and Oslo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert not [line for line in lines if line != line.rstrip()], "no trailing spaces"
    after_tool_start = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line.startswith("→ ")]
    assert "" not in after_tool_start, proc.stdout
    assert '"total_notes"' not in proc.stdout, proc.stdout  # each parallel call saw only its own draft
    assert proc.stdout.count("← save_note") == 2, proc.stdout  # one note per city it knows
    assert "Of 3 cities" not in proc.stdout and "Oslo" in proc.stdout, proc.stdout
    assert "don't know the weather in Oslo" in proc.stdout, proc.stdout
