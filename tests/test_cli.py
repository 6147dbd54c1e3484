"""The CLI on the embedded default: demo, db upgrade, sessions list/show, recover."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from helix_dbos.cli import app
from helix_dbos.cli.inputs import explain
from helix_dbos.messages import ToolResultMessage
from helix_dbos.store import SqlSessionStore
from tests.cli_process import CliProcess

REPO = Path(__file__).resolve().parents[1]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env["PYTHONPATH"] = str(REPO)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "helix_dbos.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_commands_on_the_embedded_default(tmp_path: Path) -> None:
    upgraded = _cli(tmp_path, "db", "upgrade")
    assert upgraded.returncode == 0 and "up to date" in upgraded.stdout, upgraded.stderr
    demo = _cli(tmp_path, "demo", "--message", "Weather in Paris and Lima?")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    listed = _cli(tmp_path, "sessions", "list")
    assert listed.returncode == 0 and "trip-planner" in listed.stdout and "completed" in listed.stdout
    session_id = next(word for word in listed.stdout.split() if word.startswith("session-"))
    shown = _cli(tmp_path, "sessions", "show", session_id)
    assert shown.returncode == 0, shown.stderr
    assert "run " in shown.stdout and "no pending tool calls" in shown.stdout and "Paris" in shown.stdout
    missing = _cli(tmp_path, "sessions", "show", "nope")
    assert missing.returncode == 1 and missing.stdout == "", missing.stdout
    assert missing.stderr.strip() == (
        "helix-dbos: Session 'nope' does not exist: helix-dbos sessions list shows the sessions there are"
    )
    recovered = _cli(tmp_path, "recover", "--executor-id", "ghost-worker")
    assert recovered.returncode == 0 and "re-enqueued 0 run(s)" in recovered.stdout, recovered.stdout + recovered.stderr


# --- the crash story: kill -9 a demo mid-run, then run the demo (or a worker) again ---------------

SESSION_LINE = r"session (session-[0-9a-f]+)\s"
FIRST_TOOL_CALL = r"→ get_weather"


def _crash_a_demo(tmp_path: Path) -> tuple[str, float]:
    """Start a slowed demo, SIGKILL it once its first tool call shows; returns its session id and when."""
    started = time.monotonic()
    demo = CliProcess(tmp_path, "demo", "--step-delay", "1.5")
    session_id = demo.wait_for(SESSION_LINE).group(1)
    demo.wait_for(FIRST_TOOL_CALL)
    demo.kill()
    killed_after = time.monotonic() - started
    store = SqlSessionStore(f"sqlite:///{tmp_path / '.helix' / 'helix.sqlite'}")
    try:
        session = store.load_session(session_id)
        assert session is not None and session.status == "active", "the kill must land mid-run"
    finally:
        store.close()
    return session_id, killed_after


def _assert_completed_once(tmp_path: Path, session_id: str) -> None:
    """The killed session completed, and every tool call has exactly one result and one effect."""
    store = SqlSessionStore(f"sqlite:///{tmp_path / '.helix' / 'helix.sqlite'}")
    try:
        state = store.load_state(session_id)
        assert state is not None and state.status == "completed", state
        results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
        per_call = Counter(m.tool_call_id for m in results)
        assert per_call and set(per_call.values()) == {1}, per_call
        assert sorted(m.tool_name for m in results) == ["__finish__"] + ["get_weather"] * 3 + ["save_note"] * 3
        notes = state.custom_state["notes"]
        assert len(notes) == 3 and len(set(notes)) == 3, notes  # save_note's effect, once per call
        runs = store.list_runs(session_id)
        assert [(r.turn, r.status) for r in runs] == [(1, "completed")]
    finally:
        store.close()


def test_a_killed_demo_is_recovered_by_the_next_demo(tmp_path: Path) -> None:
    killed, killed_after = _crash_a_demo(tmp_path)
    started = time.monotonic()
    again = CliProcess(tmp_path, "demo")
    assert again.wait() == 0, again.output
    rerun_seconds = time.monotonic() - started
    out = again.output
    assert f"recovering session {killed}" in out, out
    assert f"recovered session {killed}: completed" in out, out
    assert out.count("status: completed") == 1, out  # and then a new demo session ran to completion
    _assert_completed_once(tmp_path, killed)
    print(f"demo killed after {killed_after:.1f}s; rerun (recovery + new demo) took {rerun_seconds:.1f}s")


def test_a_killed_demo_is_recovered_by_a_worker_running_the_demo_agent(tmp_path: Path) -> None:
    killed, _ = _crash_a_demo(tmp_path)
    worker = CliProcess(tmp_path, "worker", "--agents", "demo")
    try:
        worker.wait_for(f"recovered session {killed}: completed", timeout=60)
    finally:
        code = worker.stop()
    assert code == 0, worker.output
    assert "LLM Provider NOT provided" not in worker.output
    _assert_completed_once(tmp_path, killed)


def test_recover_reenqueues_what_it_reports_and_a_worker_runs_it(tmp_path: Path) -> None:
    killed, _ = _crash_a_demo(tmp_path)
    recovered = _cli(tmp_path, "recover", "--executor-id", "local")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert "re-enqueued 1 run(s)" in recovered.stdout and killed in recovered.stdout, recovered.stdout
    again = _cli(tmp_path, "recover", "--executor-id", "local")  # idempotent: it is queued, not lost
    assert "re-enqueued 0 run(s)" in again.stdout and f"{killed}" in again.stdout, again.stdout
    # Another worker (another executor id) picks the queued run up and finishes it.
    worker = CliProcess(tmp_path, "worker", "--agents", "helix_dbos.demo:demo_agent", "--executor-id", "other")
    try:
        worker.wait_for(f"recovered session {killed}: completed", timeout=60)
    finally:
        assert worker.stop() == 0, worker.output
    _assert_completed_once(tmp_path, killed)


# --- foreseeable failures are one line with a hint, and a non-zero exit code ----------------------

runner = CliRunner()


def _one_line_error(args: list[str], exit_code: int, *needles: str) -> str:
    result = runner.invoke(app, args, env={"HELIX_DATABASE_URL": "", "HELIX_API_TOKENS": ""})
    assert isinstance(result.exception, SystemExit) and result.exit_code == exit_code, (result.output, result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("helix-dbos: "), result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "url", ["mysql://admin:s3cret@db.example/app", "oracle+cx://admin:s3cret@db/app", "just-a-name"]
)
@pytest.mark.parametrize("command", [["sessions", "list"], ["db", "upgrade"], ["worker", "--agents", "demo"]])
def test_an_unsupported_database_url_is_one_line(command: list[str], url: str) -> None:
    line = _one_line_error([*command, "--database-url", url], 2, "unsupported database URL", "postgresql://")
    assert "s3cret" not in line and "db.example" not in line


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("no_such_module_here:agents", "cannot import 'no_such_module_here'"),
        ("helix_dbos.demo:no_such_attribute", "has no attribute 'no_such_attribute'"),
        ("helix_dbos.demo:DEMO_MODEL", "must name an AgentConfig"),
        ("not a module!", "is not a module path"),
    ],
)
@pytest.mark.parametrize("command", ["worker", "serve", "recover"])
def test_a_bad_agents_path_is_one_line(command: str, spec: str, needle: str, tmp_path: Path) -> None:
    extra = {
        "worker": [],
        "serve": ["--allow-unauthenticated"],
        "recover": ["--executor-id", "gone"],
    }[command]
    url = f"sqlite:///{tmp_path / 'helix.sqlite'}"
    _one_line_error([command, "--agents", spec, "--database-url", url, *extra], 2, needle, "--agents")


def test_an_unmigrated_or_unopenable_sqlite_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty.sqlite").write_bytes(b"")  # a file that is there, without the tables
    _one_line_error(
        ["sessions", "list", "--database-url", f"sqlite:///{tmp_path}/empty.sqlite"], 1, "Run: helix-dbos db upgrade"
    )
    (tmp_path / "a-file").write_text("")
    _one_line_error(
        ["db", "upgrade", "--database-url", f"sqlite:///{tmp_path}/a-file/helix.sqlite"],
        1,
        "cannot open",
        "--database-url",
    )


@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "list"],
        ["sessions", "show", "some-session"],
        ["db", "upgrade"],
        ["demo"],
        ["worker", "--agents", "demo"],
        ["recover", "--executor-id", "gone"],
    ],
)
def test_a_database_that_does_not_exist_is_one_line(command: list[str], pg_server_url: str) -> None:
    url = str(make_url(pg_server_url).set(database="helix_no_such_db"))
    _one_line_error([*command, "--database-url", url], 1, "database 'helix_no_such_db' does not exist", "createdb")


def test_an_unreachable_database_server_is_one_line() -> None:
    _one_line_error(
        ["sessions", "list", "--database-url", "postgresql://nobody@127.0.0.1:9/helix"], 1, "cannot reach the database"
    )


def test_the_real_entry_point_prints_one_line_on_stderr(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "worker", "--agents", "myagents:nope", "--database-url", "mysql://x@y/z")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "helix-dbos: unsupported database URL ('mysql'): use postgresql://user@host/dbname or "
        "sqlite:///path/to/file.sqlite"
    ]


def test_agents_are_imported_from_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "my_agents.py").write_text(
        "from helix_dbos import define_agent\n"
        "agents = [define_agent('from-cwd', system_prompt='Hi.', llm_config='helix/demo-scripted')]\n"
    )
    worker = CliProcess(tmp_path, "worker", "--agents", "my_agents:agents", "--executor-id", "cwd-worker")
    try:
        worker.wait_for(r"worker up: agents=\['from-cwd'\] executor_id=cwd-worker")
    finally:
        assert worker.stop() == 0, worker.output


def test_recover_with_agents_runs_the_runs_here_and_reports_them(tmp_path: Path) -> None:
    killed, _ = _crash_a_demo(tmp_path)
    recovered = _cli(tmp_path, "recover", "--executor-id", "local", "--agents", "demo")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert "re-enqueued 1 run(s) of local" in recovered.stdout, recovered.stdout
    assert f"recovered session {killed}: completed" in recovered.stdout, recovered.stdout
    _assert_completed_once(tmp_path, killed)


@pytest.mark.parametrize(
    ("module", "extra"),
    [("fastapi", "server"), ("uvicorn", "server"), ("sse_starlette", "server"), ("litellm", "litellm")],
)
def test_a_missing_optional_extra_is_named_with_its_install_command(module: str, extra: str) -> None:
    error = explain(ModuleNotFoundError(f"No module named {module!r}", name=module))
    assert error is not None and error.exit_code == 1
    assert error.message == f"{module!r} is not installed: pip install 'helix-dbos[{extra}]'"


def test_serve_without_the_server_extra_says_what_to_install(tmp_path: Path) -> None:
    """The core install is lean: ``serve`` without FastAPI is one line naming the extra, not a traceback."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('fastapi', 'starlette', 'sse_starlette', 'uvicorn'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    proc = subprocess.run(
        [sys.executable, "-m", "helix_dbos.cli", "serve", "--agents", "demo", "--token", "t"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = proc.stderr.strip()  # which module is missing first is the service's import order
    assert "\n" not in line and line.startswith("helix-dbos: "), line
    assert "pip install 'helix-dbos[server]'" in line, line
