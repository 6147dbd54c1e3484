"""``sessions list`` / ``sessions show`` as a user meets them, each complaint of issue 14 as a test.

- ids were cut to fit the terminal (``session-d4…``), so they could not be pasted;
- times were raw milliseconds (``1795420371760``);
- ``show`` said ``running`` for a session ``list`` and the API call ``active``;
- there was no per-step view: no durations, tokens or cost;
- messages were cut at 200 characters with no way to see them whole;
- nothing had ``--json``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from tests.cli.conftest import LONG_TEXT, MODEL, USAGE, cli_env, run_cli

ISO_LOCAL = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d")
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
RAW_MS = re.compile(r"\b1\d{12}\b")

pytestmark = pytest.mark.usefixtures("cli_sessions")


def _ok(*args: str, url: str) -> str:
    proc = run_cli(*args, "--database-url", url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_list_prints_whole_ids_readable_times_and_the_api_statuses(cli_sessions: str) -> None:
    out = _ok("sessions", "list", "--wide", url=cli_sessions)
    assert "cli-done" in out and "cli-waiting" in out
    assert "…" not in out, out  # nothing cut to fit 60 columns
    assert re.search(r"cli-waiting\s*│\s*cli-agent\s*│\s*active\s*│", out), out
    assert re.search(r"cli-done\s*│\s*cli-agent\s*│\s*completed\s*│", out), out
    assert ISO_LOCAL.search(out) and not RAW_MS.search(out), out


def test_list_and_show_say_what_the_api_says(cli_sessions: str) -> None:
    from helix_dbos.store import SqlSessionStore

    with SqlSessionStore(cli_sessions) as store:
        api_word = {s: store.load_session(s).status for s in ("cli-done", "cli-waiting")}  # type: ignore[union-attr]
    assert api_word == {"cli-done": "completed", "cli-waiting": "active"}  # GET /v1/sessions/{id} "status"
    listed = {s["session_id"]: s["status"] for s in json.loads(_ok("sessions", "list", "--json", url=cli_sessions))}
    for session_id, word in api_word.items():
        assert listed[session_id] == word
        shown = json.loads(_ok("sessions", "show", session_id, "--json", url=cli_sessions))
        assert shown["status"] == word
        text = _ok("sessions", "show", session_id, url=cli_sessions)
        assert f"status {word}" in text, text
    waiting = json.loads(_ok("sessions", "show", "cli-waiting", "--json", url=cli_sessions))
    assert waiting["runs"][0]["status"] == "suspended"  # a run's word, as GET .../runs says it
    assert [c["tool_call_id"] for c in waiting["pending_tool_calls"]] == ["d1"]


def test_show_has_a_step_timeline_with_durations_tokens_and_cost(cli_sessions: str) -> None:
    shown = json.loads(_ok("sessions", "show", "cli-done", "--json", url=cli_sessions))
    (run,) = shown["runs"]
    assert run["status"] == "completed" and run["duration_ms"] >= 0
    assert ISO_UTC.match(run["started_at"]) and ISO_UTC.match(run["completed_at"])
    steps = run["steps"]
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    assert all(isinstance(s["duration_ms"], int) and s["duration_ms"] >= 0 for s in steps)
    assert all(s["checkpoint_id"].startswith("cpv1-cli-done-") for s in steps)
    assert [(s["input_tokens"], s["output_tokens"]) for s in steps[1:]] == USAGE
    assert [[t["name"] for t in s["tool_calls"]] for s in steps] == [[], ["lookup"], ["lookup"], []]
    # The prices of LiteLLM's cost map file, read here rather than through ``import litellm``: an
    # import of LiteLLM in this process would change the warnings the integration tests see.
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.origin is not None
    prices = json.loads((Path(spec.origin).parent / "model_prices_and_context_window_backup.json").read_text())
    gpt = prices[MODEL.partition("/")[2]]
    expected_cost = sum(i * gpt["input_cost_per_token"] + o * gpt["output_cost_per_token"] for i, o in USAGE)
    assert expected_cost > 0
    assert shown["totals"]["cost_usd"] == pytest.approx(expected_cost)
    assert shown["totals"]["input_tokens"] == sum(i for i, _ in USAGE)
    assert shown["totals"]["output_tokens"] == sum(o for _, o in USAGE)
    assert shown["totals"]["llm_calls"] == 3 and shown["totals"]["tool_calls"] == 2

    text = _ok("sessions", "show", "cli-done", "--wide", url=cli_sessions)
    assert "run cli-done-turn-1" in text and "took" in text
    for step in steps[1:]:
        assert re.search(
            rf"\b{step['step']}\s+\S+\s+\d+(\.\d)? m?s\s+{re.escape(MODEL)}\s+{step['input_tokens']}\s+", text
        ), text
        assert step["checkpoint_id"] in text  # whole: what fork --checkpoint takes
    assert f"{sum(i for i, _ in USAGE)} input / {sum(o for _, o in USAGE)} output tokens" in text
    assert f"${expected_cost:.6f}" in text


def test_messages_are_previews_unless_asked_for_whole(cli_sessions: str) -> None:
    preview = _ok("sessions", "show", "cli-done", url=cli_sessions)
    assert "THE-END" not in preview and "--messages prints them whole" in preview
    for flag in ("--messages", "--full"):
        whole = _ok("sessions", "show", "cli-done", flag, url=cli_sessions)
        assert LONG_TEXT in whole.replace("\n", ""), whole
    shown = json.loads(_ok("sessions", "show", "cli-done", "--json", "--messages", url=cli_sessions))
    assert any(LONG_TEXT in m.get("content", "") for m in shown["messages"] if m["role"] == "tool")
    assert "messages" not in json.loads(_ok("sessions", "show", "cli-done", "--json", url=cli_sessions))


SESSION_KEYS = {
    "session_id",
    "agent",
    "status",
    "turn",
    "step_count",
    "message_count",
    "run_id",
    "created_at",
    "created_at_ms",
    "updated_at",
    "updated_at_ms",
    "error",
    "aborted",
    "forked_from",
}


def test_every_listing_has_json_with_stable_keys(cli_sessions: str) -> None:
    listed = json.loads(_ok("sessions", "list", "--json", url=cli_sessions))
    assert listed and all(set(item) == SESSION_KEYS for item in listed)
    assert all(ISO_UTC.match(item["updated_at"]) for item in listed)
    assert json.loads(_ok("sessions", "list", "--json", "--status", "failed", url=cli_sessions)) == []
    bad = run_cli("sessions", "list", "--status", "running", "--database-url", cli_sessions)
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "helix-dbos: unknown --status 'running': use one of active, completed, failed, interrupted, paused"
    ]
    shown = json.loads(_ok("sessions", "show", "cli-done", "--json", url=cli_sessions))
    assert set(shown) == SESSION_KEYS | {"output", "custom_state", "totals", "usage", "runs", "pending_tool_calls"}
    assert set(shown["runs"][0]) == {
        "run_id",
        "turn",
        "mode",
        "status",
        "previous_run_id",
        "started_at",
        "started_at_ms",
        "completed_at",
        "completed_at_ms",
        "duration_ms",
        "step_count",
        "error",
        "waiting_for_rate_limit",
        "totals",
        "usage",
        "steps",
    }


def test_queue_status_has_json_too(cli_sessions: str) -> None:
    """``queue-status`` lists workers: like every listing it has ``--json`` (the ``QueueStatus`` fields)."""
    status = json.loads(_ok("queue-status", "--json", url=cli_sessions))
    assert status["name"] == "helix-runs" and status["running_by_worker"] == {}, status
    assert {"enqueued", "running", "concurrency", "worker_concurrency"} <= set(status)


@pytest.mark.parametrize(
    "args",
    [["sessions", "show", "nope"], ["tail", "nope"], ["fork", "nope"]],
)
def test_an_unknown_session_is_one_line_with_a_hint(cli_sessions: str, args: list[str]) -> None:
    proc = run_cli(*args, "--database-url", cli_sessions)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "helix-dbos: Session 'nope' does not exist: helix-dbos sessions list shows the sessions there are"
    ]


def test_list_and_show_fit_an_80_column_terminal_with_ids_whole(cli_sessions: str) -> None:
    """Before: 125- and 170-column tables whatever the width, so the terminal wrapped every row."""
    env = cli_env(COLUMNS="80")
    listed = run_cli("sessions", "list", "--database-url", cli_sessions, env=env)
    assert listed.returncode == 0, listed.stderr
    assert all(len(line) <= 80 for line in listed.stdout.splitlines()), listed.stdout
    assert re.search(r"^cli-done\s+completed$", listed.stdout, re.M), listed.stdout
    assert "cli-agent · turn 1 · 3 steps · 6 messages · updated" in listed.stdout, listed.stdout
    shown = run_cli("sessions", "show", "cli-done", "--database-url", cli_sessions, env=env)
    assert shown.returncode == 0, shown.stderr
    steps = json.loads(_ok("sessions", "show", "cli-done", "--json", url=cli_sessions))["runs"][0]["steps"]
    timeline = shown.stdout.split("run total")[0].split("\nrun ")[1].splitlines()[1:]
    assert timeline and all(len(line) <= 80 for line in timeline), shown.stdout
    for step in steps:
        assert f"step {step['step']} " in shown.stdout and step["checkpoint_id"] in shown.stdout  # whole
    assert f"{MODEL} · in {USAGE[0][0]} · out {USAGE[0][1]}" in shown.stdout, shown.stdout
