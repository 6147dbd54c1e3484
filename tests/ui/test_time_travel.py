"""Time travel in the web inspector: "Fork from here" on a timeline step, with an edited input and state.

A completed ``echo`` session is opened; its last step's "Fork from here" asks for the edits (a bad
JSON merge patch is refused in the dialog, nothing is sent), forks at that step's checkpoint with
the user's message replaced and the state patched, runs the fork and opens it: the fork's transcript
shows the model answering the edited input, and the original's transcript is what it was.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.ui.conftest import AUTH
from tests.ui.test_inspector import completed_echo, expect_text, login

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]


def test_fork_from_a_step_with_an_edited_input_runs_the_fork(page: Any, inspector_url: str) -> None:
    session_id = completed_echo(inspector_url, "the original question")
    with httpx.Client(base_url=inspector_url, headers=AUTH, timeout=30) as http:
        before = http.get(f"/v1/sessions/{session_id}/messages").json()
    requests: list[Any] = []
    page.on("request", lambda request: requests.append(request))
    login(page, inspector_url)
    page.goto(f"{inspector_url}/ui#/s/{session_id}")
    page.get_by_role("button", name="Fork from turn 1 step 1").click()
    dialog = page.get_by_role("dialog", name="Fork from turn 1 step 1")
    dialog.get_by_label("Edited input", exact=True).fill("the question, edited")
    dialog.get_by_label("State merge patch (JSON)").fill("{not json")
    dialog.get_by_role("button", name="Fork", exact=True).click()
    expect_text(dialog.get_by_role("alert"), "not JSON")
    assert not [r for r in requests if r.url.endswith("/fork")]

    dialog.get_by_label("State merge patch (JSON)").fill('{"edited": true}')
    dialog.get_by_role("button", name="Fork", exact=True).click()
    page.locator("h1 code").filter(has_not_text=session_id).wait_for()
    fork_id = page.locator("h1 code").inner_text()
    expect_text(page.locator("#session-status"), "completed")
    expect_text(page.locator("#transcript"), "echo: the question, edited")

    with httpx.Client(base_url=inspector_url, headers=AUTH, timeout=30) as http:
        assert http.get(f"/v1/sessions/{session_id}/messages").json() == before
        assert http.get(f"/v1/sessions/{fork_id}/state").json()["state"] == {"edited": True}
        forked = [m["content"] for m in http.get(f"/v1/sessions/{fork_id}/messages").json()["messages"]]
    assert forked == ["the question, edited", "echo: the question, edited"]
