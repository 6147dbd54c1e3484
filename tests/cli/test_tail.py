"""``helix-dbos tail SESSION``: a real CLI process following a real durable stream on PostgreSQL.

The test writes the session's chunks itself (``SqlStreamManager``, as a run does), so it decides
when each one lands: before tail attaches, while it waits, after the database dropped its
connection, and the stream's end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from helix_dbos.runtime.aio import background_loop
from helix_dbos.store import SqlSessionStore
from helix_dbos.stream.chunks import OutputChunk, StreamChunk, TextDeltaChunk, ToolEndChunk, ToolStartChunk
from helix_dbos.stream.sql import SqlStreamManager
from tests.cli.conftest import REPO, cli_env, run_cli
from tests.cli_process import CliProcess

BASE = {"agent_id": "run-1", "agent_type": "tailer"}


@pytest.fixture(scope="module")
def tail_db(new_migrated_database: Callable[[str], str]) -> str:
    url = new_migrated_database("tail")
    return url


class Stream:
    """A session and its stream, written from the test."""

    def __init__(self, url: str, session_id: str) -> None:
        self.session_id = session_id
        with SqlSessionStore(url) as store:
            store.create_session(session_id, agent_type="tailer", custom_state={}, now_ms=1)
        self.manager = SqlStreamManager(url)
        self.writer = background_loop.run(self.manager.create_writer(session_id, "run-1", "tailer"))

    def write(self, *chunks: StreamChunk) -> None:
        for chunk in chunks:
            background_loop.run(self.writer.write(chunk))
        background_loop.run(self.manager.flush())

    def end(self) -> None:
        background_loop.run(self.manager.end_stream(self.session_id))

    def fail(self, error: str) -> None:
        background_loop.run(self.manager.fail_stream(self.session_id, error))

    def close(self) -> None:
        background_loop.run(self.manager.aclose())


@pytest.fixture
def stream(tail_db: str, request: pytest.FixtureRequest) -> Iterator[Stream]:
    opened = Stream(tail_db, f"tail-{request.node.name[:40]}")
    yield opened
    opened.close()


def _tail(tail_db: str, *args: str, env: dict[str, str] | None = None) -> CliProcess:
    return CliProcess(REPO, "tail", *args, "--database-url", tail_db, env=env or cli_env())


def _text(content: str) -> TextDeltaChunk:
    return TextDeltaChunk(**BASE, content=content)


def test_tail_follows_a_live_session_until_its_stream_ends(tail_db: str, stream: Stream) -> None:
    lookup = {"tool_call_id": "c1", "tool_name": "lookup"}
    stream.write(_text("Looking "), _text("it up."), ToolStartChunk(**BASE, **lookup, arguments={"q": "x"}))
    tail = _tail(tail_db, stream.session_id)
    tail.wait_for(r"→ lookup")  # what was there before it attached
    stream.write(ToolEndChunk(**BASE, **lookup, result={"found": 1}), _text("Found "), _text("one."))
    stream.write(ToolStartChunk(**BASE, tool_call_id="c2", tool_name="note", arguments={}))
    tail.wait_for(r"→ note")  # live: written while it waited
    stream.write(OutputChunk(**BASE, output={"answer": 1}))
    stream.end()
    assert tail.wait(timeout=60) == 0, tail.output
    assert tail.output.splitlines() == [
        "Looking it up.",
        '→ lookup {"q": "x"}',
        '← lookup {"found": 1}',
        "Found one.",
        "→ note {}",
        'output {"answer": 1}',
        "stream ended",
    ], tail.output


def test_tail_exits_1_when_the_stream_failed(tail_db: str, stream: Stream) -> None:
    stream.write(_text("half"))
    stream.fail("the run failed: boom")
    proc = run_cli("tail", stream.session_id, "--database-url", tail_db)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["half", "stream failed: the run failed: boom"]


def test_json_prints_raw_chunks_and_from_sequence_resumes(tail_db: str, stream: Stream) -> None:
    stream.write(_text("a"), _text("b"), _text("c"))
    stream.end()
    everything = run_cli("tail", stream.session_id, "--json", "--database-url", tail_db)
    assert everything.returncode == 0, everything.stderr
    records: list[dict[str, Any]] = [json.loads(line) for line in everything.stdout.splitlines()]
    assert [(r["sequence"], r["chunk"]["type"], r["chunk"]["content"]) for r in records] == [
        (1, "text_delta", "a"),
        (2, "text_delta", "b"),
        (3, "text_delta", "c"),
    ]
    assert records[0]["chunk"]["agent_id"] == "run-1"
    rest = run_cli("tail", stream.session_id, "--json", "--from-sequence", "2", "--database-url", tail_db)
    assert [json.loads(line)["sequence"] for line in rest.stdout.splitlines()] == [3]


def test_tail_resumes_by_itself_after_the_database_drops_its_connection(tail_db: str, stream: Stream) -> None:
    # No retries inside the store layer: the reconnecting is tail's own.
    tail = _tail(tail_db, stream.session_id, env=cli_env(HELIX_DB_RETRY_SECONDS="0"))
    stream.write(ToolStartChunk(**BASE, tool_call_id="c1", tool_name="before_the_drop", arguments={}))
    tail.wait_for("→ before_the_drop")
    engine = sa.create_engine(tail_db)
    try:
        with engine.connect() as conn:
            killed = conn.execute(
                sa.text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
    finally:
        engine.dispose()
    assert killed >= 1
    stream.write(ToolStartChunk(**BASE, tool_call_id="c2", tool_name="after_the_drop", arguments={}))
    stream.end()
    assert tail.wait(timeout=90) == 0, tail.output
    out = tail.output
    assert "database connection lost; resuming after sequence 1" in out, out
    assert out.count("→ before_the_drop") == 1 and out.count("→ after_the_drop") == 1, out
    assert out.rstrip().endswith("stream ended"), out


def test_tail_on_the_embedded_default_follows_a_demo_and_its_fork(tmp_path: Path) -> None:
    """SQLite under ``.helix/``, no ``--database-url``: the demo, its stream, a fork of it."""
    env = cli_env(COLUMNS="200")
    demo = run_cli("demo", cwd=tmp_path, env=env)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    session_id = json.loads(run_cli("sessions", "list", "--json", cwd=tmp_path, env=env).stdout)[0]["session_id"]
    tailed = run_cli("tail", session_id, cwd=tmp_path, env=env)
    assert tailed.returncode == 0, tailed.stderr
    assert '→ get_weather {"city": "Paris"}' in tailed.stdout and tailed.stdout.rstrip().endswith("stream ended")
    forked = run_cli("fork", session_id, "--new-session", "demo-fork", "--json", cwd=tmp_path, env=env)
    assert forked.returncode == 0, forked.stderr
    fork = json.loads(forked.stdout)
    assert (fork["session_id"], fork["created"], fork["status"]) == ("demo-fork", True, "completed")
    fork_tail = run_cli("tail", "demo-fork", cwd=tmp_path, env=env)
    assert fork_tail.stdout.splitlines() == [
        f"↻ resync (branch) from checkpoint {fork['checkpoint_id']} (step {fork['step_count']}, "
        f"{fork['message_count']} messages)",
        "stream ended",
    ], fork_tail.stdout
