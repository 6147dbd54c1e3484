"""The inspector shows what the model saw beside the transcript, for a session whose runs compacted.

``compactor`` (tests/ui/agents.py) runs three turns of one session over HTTP; its third turn
compacts (older turns summarised, an older tool result cleared). In the browser, a timeline step's
"What the model saw" shows the messages that model call was sent: the summary marked as one, the
cleared result marked as cleared (the transcript beside it still holds the result), and the
transcript messages it did not see. HTML in the user's messages and the summary shows as text. A
call before the compaction, and a session without one, say the model saw the transcript as is; a
link to a step without a model call says so in the panel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from helix_dbos.compaction import CLEARED_TOOL_RESULT
from tests.ui.agents import SUMMARY_TEXT
from tests.ui.conftest import AUTH
from tests.ui.test_inspector import completed_echo, expect_text, login

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

HTML_INPUT = '<img src=x onerror="window.__pwned=1"> weather in <b>Lima</b> and <i>Oslo</i>?'


def compacted_session(base: str) -> tuple[str, list[str]]:
    """Three completed turns of ``compactor`` in one session: its id and the runs' ids."""
    session_id = "compacted-cities"
    runs = []
    with httpx.Client(base_url=base, headers=AUTH, timeout=30) as http:
        for turn in (1, 2, 3):
            body = {"agent": "compactor", "input": f"turn {turn}: {HTML_INPUT}", "session_id": session_id}
            started = http.post("/v1/runs", json=body)
            assert started.status_code == 202, started.text
            runs.append(started.json()["run_id"])
            result = http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 30}).json()
            assert result["status"] == "completed", result
    return session_id, runs


def test_a_compacted_step_shows_the_summary_the_cleared_result_and_the_dropped_messages(
    page: Any, inspector_url: str, tmp_path: Path
) -> None:
    session_id, runs = compacted_session(inspector_url)
    login(page, inspector_url)
    page.goto(f"{inspector_url}/ui#/s/{session_id}")
    panel = page.locator("#model-view")

    # Before the compaction: the transcript as it is.
    page.get_by_role("button", name="What the model saw at turn 1 step 1").click()
    expect_text(panel, "At turn 1 step 1")
    expect_text(panel, "the model saw the transcript as is")

    page.get_by_role("button", name="What the model saw at turn 3 step 2").click()
    expect_text(panel, "At turn 3 step 2")
    expect_text(panel, "A compaction was in effect")
    sent = panel.locator("#model-view-sent > li")
    with httpx.Client(base_url=inspector_url, headers=AUTH, timeout=30) as http:
        view = http.get(f"/v1/sessions/{session_id}/model-view", params={"run_id": runs[2], "step": 2}).json()
    assert sent.count() == len(view["messages"]), view
    assert [sent.nth(i).get_attribute("data-kind") for i in range(sent.count())] == [
        m["kind"] for m in view["messages"]
    ]

    # The summary, marked as one, its HTML-looking text shown as text.
    summary = panel.locator("li[data-kind=summary]")
    assert summary.count() == 1
    expect_text(summary.locator(".role"), "summary")
    expect_text(summary, SUMMARY_TEXT)

    # The cleared result: the placeholder the model saw, marked; the transcript still has the result.
    cleared = panel.locator("li[data-kind=cleared_tool_result]")
    assert cleared.count() == 1
    expect_text(cleared.locator(".role"), "cleared")
    expect_text(cleared, CLEARED_TOOL_RESULT)
    index = int(cleared.get_attribute("data-transcript-index") or "-1")
    in_transcript = page.locator(f"#transcript > li[data-transcript-index='{index}']")
    expect_text(in_transcript.locator(".role"), f"#{index} ")
    expect_text(in_transcript, "sunny in")

    # docs/inspector-model-view.png: the view beside the transcript.
    page.locator("main .grid").screenshot(path=str(tmp_path / "model-view-beside-transcript.png"))

    # What was dropped: the earlier turns, the first user message among them.
    dropped = view["transcript_marks"].count("dropped")
    panel.get_by_text(f"Dropped from the model's view: {dropped} transcript message(s)").click()
    dropped_items = panel.locator("#model-view-dropped > li")
    expect_text(dropped_items.first, f"turn 1: {HTML_INPUT}")
    assert dropped_items.count() == dropped
    assert "null" not in panel.inner_text()

    # Model and user text is never parsed as HTML: no element came of it, no handler ran.
    assert page.locator("#model-view b, #model-view i, #model-view img, #transcript img").count() == 0
    assert page.evaluate("window.__pwned === undefined")
    page.screenshot(path=str(tmp_path / "model-view.png"), full_page=True)

    # The URL names the step shown: a reload shows it again, the stream and the page intact.
    assert f"run={runs[2]}" in page.url and "step=2" in page.url
    page.reload()
    expect_text(panel, "At turn 3 step 2")
    expect_text(panel.locator("li[data-kind=summary]"), SUMMARY_TEXT)
    assert page.locator("#notice").is_hidden()


def test_no_compaction_says_as_is_and_a_step_without_a_model_call_says_why(page: Any, inspector_url: str) -> None:
    session_id = completed_echo(inspector_url, "<b>plain</b>")
    login(page, inspector_url)
    page.goto(f"{inspector_url}/ui#/s/{session_id}")
    page.get_by_role("button", name="What the model saw at turn 1 step 1").click()
    panel = page.locator("#model-view")
    expect_text(panel, "No compaction was in effect: the model saw the transcript as is")
    # Step 0 is the run's start: no button for it.
    assert page.get_by_role("button", name="What the model saw at turn 1 step 0").count() == 0

    # A link to a step the run never made: the service's 404, said in the panel, not a broken page.
    with httpx.Client(base_url=inspector_url, headers=AUTH, timeout=30) as http:
        run_id = http.get(f"/v1/sessions/{session_id}/timeline").json()["runs"][0]["run_id"]
    page.goto(f"{inspector_url}/ui#/s/{session_id}?run={run_id}&step=7")
    expect_text(panel, "Nothing to show at turn 1 step 7")
    expect_text(panel, "state_checkpoint_not_found")
    assert page.locator("#notice").is_hidden()
    expect_text(page.locator("#transcript"), "echo: <b>plain</b>")
