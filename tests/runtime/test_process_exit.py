"""A process that exits (not killed) while a run is in flight leaves the run to be recovered.

The app's main thread returns without ``shutdown()``: Python starts shutting down and its thread
pools refuse work, so the run's next model call fails. That failure is the exit's, not the run's:
it must not be recorded (which would fail the run for good); the next process must finish the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    import sys, time
    from helix_dbos.demo import DemoModel, build_demo_agent
    from helix_dbos.runtime.launch import launch, shutdown

    agent = build_demo_agent(step_delay_seconds=0.6)
    executor = launch("sqlite:///app.sqlite", agents=[agent], llm_adapter=DemoModel(0.6))
    if sys.argv[1] == "start":
        handle = executor.execute(agent, "Compare Paris, Tokyo and Lima")
        print(handle.session_id, flush=True)
        time.sleep(1.0)
        raise SystemExit(0)  # the app leaves, run in flight, no shutdown()
    session_id = sys.argv[2]
    deadline = time.time() + 60
    while time.time() < deadline:
        session = executor.store.load_session(session_id)
        if session.status in ("completed", "failed"):
            break
        time.sleep(0.1)
    print(session.status, session.error, flush=True)
    shutdown(executor)
    """
)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(tmp_path / "app.py"), *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_in_flight_when_the_app_exits_is_finished_by_the_next_process(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    first = _run(tmp_path, "start")
    assert first.returncode == 0, first.stderr
    session_id = first.stdout.split()[0]

    second = _run(tmp_path, "check", session_id)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split()[0] == "completed", second.stdout + second.stderr
