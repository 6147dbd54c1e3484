"""The web inspector in a real browser: headless Chromium against a real ``helix-dbos serve``.

One run of ``gatekeeper`` (tests/ui/agents.py) is watched and steered from the page as an operator
would: log in, start it, see its text stream in, reload mid-run and see the stream resume, cut the
stream and see it resume after the last chunk, approve one tool (double-clicked: answered once)
and deny the other with a reason, see the run complete and the timeline fill. A wrong token shows
an error and no data. The start form offers the served agents; the timeline shows each step's
status; controls are enabled only when they apply; a failed page load says why and offers to try
again. Screenshots land in the test's temp dir.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ui.agents import PLAN_TEXT
from tests.ui.conftest import AUTH, TOKEN

# A real server starts in the first test's setup: under a loaded CI machine that alone can take a minute.
pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]


def login(page: Any, base: str, token: str = TOKEN) -> None:
    page.goto(f"{base}/ui")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Log in").click()


def pending_card(page: Any, tool: str) -> Any:
    return page.locator("article.pending", has=page.locator("h3 code", has_text=tool))


def test_operator_runs_approves_denies_and_watches_it_complete(page: Any, inspector_url: str, tmp_path: Path) -> None:
    requests: list[Any] = []
    page.on("request", lambda request: requests.append(request))

    # Keyboard only: the token field, Enter to log in.
    page.goto(f"{inspector_url}/ui")
    page.keyboard.press("Tab")  # the skip link
    page.get_by_label("API token").focus()
    page.keyboard.type(TOKEN)
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Sessions").wait_for()

    page.get_by_label("Agent", exact=True).select_option("gatekeeper")
    page.get_by_label("Message", exact=True).fill("clean up and ship")
    page.get_by_role("button", name="Start").click()
    page.get_by_role("heading", name=re.compile("^Session ")).wait_for()
    session_id = page.url.split("#/s/")[1]

    live = page.locator("#live-text")
    expect_text(live, PLAN_TEXT)
    pending_card(page, "remove").wait_for()
    pending_card(page, "deploy").wait_for()
    page.screenshot(path=str(tmp_path / "session-waiting.png"), full_page=True)

    # Reload mid-run (the run waits for the approvals): the stream resumes, the approvals are still there.
    page.reload()
    expect_text(live, PLAN_TEXT)
    pending_card(page, "deploy").wait_for()
    page.locator("#stream-state", has_text="live").wait_for()

    # Cut the connection as a network failure would: it resumes after the last chunk it saw, so
    # nothing is shown twice.
    before = page.evaluate("window.helixInspector.stream().lastEventId")
    page.evaluate("window.helixInspector.stream().drop()")
    poll(page, "window.helixInspector.stream().reconnects >= 1")
    page.locator("#stream-state", has_text="live").wait_for()
    assert page.evaluate("window.helixInspector.stream().lastEventId") == before
    assert live.inner_text().count(PLAN_TEXT) == 1

    # A double click on Approve answers once.
    submits_before = len([r for r in requests if r.url.endswith("/tool-results")])
    pending_card(page, "remove").get_by_role("button", name="Approve").dblclick()
    expect_text(page.locator("#answers"), "Approved remove.")

    deny_card = pending_card(page, "deploy")
    deny_card.get_by_label("Reason for deploy").fill("not on a Friday")
    # A refresh while the operator types (any chunk brings one) keeps what they typed.
    refreshes = page.evaluate("window.helixInspector.refreshes()")
    page.evaluate("window.helixInspector.refresh()")
    poll(page, f"window.helixInspector.refreshes() > {refreshes}")
    assert deny_card.get_by_label("Reason for deploy").input_value() == "not on a Friday"
    deny_card.get_by_role("button", name="Deny").click()

    expect_text(page.locator("#answers"), "Denied deploy: not on a Friday.")
    page.locator("#session-status", has_text="completed").wait_for(timeout=30_000)
    expect_text(live, "All done.")
    submits = [r for r in requests if r.url.endswith("/tool-results")]
    assert len(submits) - submits_before == 2, [r.post_data for r in submits]
    assert page.locator("#notice").is_hidden(), page.locator("#notice").inner_text()

    # The denial carried its reason (the transcript says "not approved", as the seeds word it).
    denial = json.loads(submits[-1].post_data)
    assert denial["approved"] is False and denial["reason"] == "not on a Friday", denial
    assert denial["arguments_digest"], denial
    transcript = page.locator("#transcript")
    expect_text(transcript, "Tool call was not approved by the user")
    assert transcript.locator(".msg-tool").count() == 2
    expect_text(page.locator("#custom-state"), "removed /tmp/cache")
    steps = page.locator("#timeline tr.step-row")
    steps.nth(1).wait_for()
    assert steps.count() >= 2
    page.screenshot(path=str(tmp_path / "session-completed.png"), full_page=True)

    # The server agrees: completed, one answer per call.
    with httpx.Client(base_url=inspector_url, headers=AUTH) as http:
        snapshot = http.get(f"/v1/sessions/{session_id}").json()
        messages = http.get(f"/v1/sessions/{session_id}/messages").json()["messages"]
    assert snapshot["status"] == "completed" and snapshot["pending_tool_calls"] == []
    assert sorted(m["tool_name"] for m in messages if m["role"] == "tool") == ["deploy", "remove"]

    # Controls ask first (a dismissed question sends nothing); a completed session has nothing to
    # resume, interrupt or abort (test_controls_are_enabled_only_when_they_apply has the refusals).
    retries = len([r for r in requests if r.url.endswith("/retry")])
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Retry").click()
    assert page.locator("#notice").is_hidden()
    assert len([r for r in requests if r.url.endswith("/retry")]) == retries
    assert page.get_by_role("button", name="Resume").is_disabled()

    # Readable at 390 px: nothing wider than the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(tmp_path / "session-390.png"), full_page=True)

    # The sessions list shows it, and filters.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("link", name="← Sessions").click()
    row = page.locator("table[aria-label=Sessions] tr", has_text=session_id)
    expect_text(row, "completed")
    page.screenshot(path=str(tmp_path / "sessions.png"), full_page=True)
    page.get_by_label("Status filter").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    page.get_by_text("No sessions.").wait_for()

    # Fork from the first step's checkpoint: a new session page, its transcript cut there.
    page.goto(f"{inspector_url}/ui#/s/{session_id}")
    page.locator("#checkpoint option", has_text="turn 1 step 1").wait_for(state="attached")
    page.get_by_label("Checkpoint for retry or fork").select_option(label="turn 1 step 1")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Fork", exact=True).click()
    page.locator("h1 code").filter(has_not_text=session_id).wait_for()
    assert page.locator("h1 code").inner_text() != session_id
    expect_text(page.locator("#session-status"), "completed")

    # The token never travels in a URL.
    assert all(TOKEN not in r.url for r in requests)
    assert page.evaluate("sessionStorage.getItem('helix-dbos.token')") == TOKEN


def test_a_client_tool_answered_with_json_from_the_keyboard(page: Any, inspector_url: str) -> None:
    with httpx.Client(base_url=inspector_url, headers=AUTH) as http:
        session_id = http.post("/v1/runs", json={"agent": "locator", "input": "where am I?"}).json()["session_id"]
    login(page, inspector_url)
    page.get_by_role("link", name=session_id).wait_for()
    # The sessions list shows it waiting; open it with the keyboard.
    page.get_by_role("link", name=session_id).focus()
    page.keyboard.press("Enter")
    card = pending_card(page, "get_location")
    result = card.get_by_label("JSON result for get_location")
    result.focus()
    page.keyboard.press("Control+A")
    page.keyboard.type('{"city": "not json')
    page.keyboard.press("Tab")  # to "Send result"
    page.keyboard.press("Enter")
    expect_text(page.locator("#notice"), "not JSON")  # refused in the page, nothing sent
    result.fill('{"city": "Lima"}')
    card.get_by_role("button", name="Send result").press("Enter")
    page.locator("#session-status", has_text="completed").wait_for(timeout=30_000)
    expect_text(page.locator("#transcript"), "Lima")


def test_a_wrong_token_shows_an_error_and_no_data(page: Any, inspector_url: str) -> None:
    with httpx.Client(base_url=inspector_url, headers=AUTH) as http:
        started = http.post("/v1/runs", json={"agent": "gatekeeper", "input": "secret plans"})
        assert started.status_code == 202, started.text
        session_id = started.json()["session_id"]
    login(page, inspector_url, token="not-the-token")
    expect_text(page.locator("#notice"), "refused")
    assert page.get_by_label("API token").is_visible()
    body = page.locator("body").inner_text()
    assert session_id not in body and "gatekeeper" not in body
    assert page.evaluate("sessionStorage.getItem('helix-dbos.token')") is None
    # A session page opened by its link asks for the token too, and shows nothing of the session.
    page.goto(f"{inspector_url}/ui#/s/{session_id}")
    page.get_by_label("API token").wait_for()
    assert "secret plans" not in page.locator("body").inner_text()


@pytest.mark.slow
def test_paging_through_many_sessions_on_a_phone(page: Any, inspector_url: str) -> None:
    with httpx.Client(base_url=inspector_url, headers=AUTH, timeout=30) as http:
        for i in range(25):
            sid = f"page-echo-{i:02d}"
            assert http.post("/v1/runs", json={"agent": "echo", "input": f"n{i}", "session_id": sid}).status_code == 202
            result = http.get(f"/v1/sessions/{sid}/result", params={"timeout_seconds": 30}).json()
            assert result["status"] == "completed", result
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, inspector_url)
    page.get_by_label("Agent filter").fill("echo")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("table[aria-label=Sessions] tbody tr")
    page.get_by_role("link", name="page-echo-24").wait_for()
    assert rows.count() == 20
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.get_by_role("button", name="Next").click()
    page.get_by_role("link", name="page-echo-00").wait_for()
    assert rows.count() == 5
    assert page.get_by_role("button", name="Next").is_disabled()
    page.get_by_role("button", name="Previous").click()
    page.get_by_role("link", name="page-echo-24").wait_for()


def completed_echo(base: str, text: str = "hi") -> str:
    """A session of ``echo`` whose one run completed (started and awaited over HTTP)."""
    with httpx.Client(base_url=base, headers=AUTH, timeout=30) as http:
        session_id: str = http.post("/v1/runs", json={"agent": "echo", "input": text}).json()["session_id"]
        result = http.get(f"/v1/sessions/{session_id}/result", params={"timeout_seconds": 30}).json()
    assert result["status"] == "completed", result
    return session_id


def test_the_start_form_offers_the_served_agents(page: Any, inspector_url: str, tmp_path: Path) -> None:
    login(page, inspector_url)
    agent = page.get_by_label("Agent", exact=True)
    page.locator("#run-agent option[value=echo]").wait_for(state="attached", timeout=5_000)
    offered = [o.get_attribute("value") for o in page.locator("#run-agent option").all()]
    # The served agents, after a choice that starts none: several agents, so none is preselected.
    assert offered == ["", "compactor", "echo", "gatekeeper", "locator"], offered
    assert agent.input_value() == ""
    page.get_by_label("Message", exact=True).fill("hello")
    page.get_by_role("button", name="Start").click()
    assert page.get_by_role("heading", name="Sessions").is_visible()  # the form asks for an agent first
    agent.select_option("echo")
    page.get_by_role("button", name="Start").click()
    expect_text(page.locator("#transcript"), "echo: hello")

    # Readable at 390 px with the list of agents.
    page.get_by_role("link", name="← Sessions").click()
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#run-agent option[value=echo]").wait_for(state="attached")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(tmp_path / "start-390.png"), full_page=True)

    # A service with one agent: it is chosen already.
    page.route(
        "**/v1/agents",
        lambda route: route.fulfill(json={"agents": [{"name": "echo", "description": "Repeats you."}]}),
    )
    page.reload()
    page.locator("#run-agent option[value=echo]").wait_for(state="attached")
    assert agent.input_value() == "echo"
    page.get_by_label("Message", exact=True).fill("only one")
    page.get_by_role("button", name="Start").click()
    expect_text(page.locator("#transcript"), "echo: only one")


def test_the_timeline_shows_each_steps_true_status(page: Any, inspector_url: str) -> None:
    session_id = completed_echo(inspector_url)
    login(page, inspector_url)
    page.goto(f"{inspector_url}/ui#/s/{session_id}")
    steps = page.locator("#timeline tr.step-row")
    steps.nth(1).wait_for()
    statuses = [steps.nth(i).locator("td").nth(2).inner_text() for i in range(steps.count())]
    # Step 0 was committed while the run went on; the run ended completed at step 1. No step of a
    # finished run is shown as still running.
    assert statuses == ["committed", "completed"], statuses
    assert page.locator("#timeline th", has_text="Checkpoint status").count() == 0


def control(page: Any, name: str) -> Any:
    return page.locator("#controls").get_by_role("button", name=name, exact=True)


def test_controls_are_enabled_only_when_they_apply(page: Any, inspector_url: str, tmp_path: Path) -> None:
    # A completed session: nothing to interrupt, resume or abort; retry and fork apply.
    done = completed_echo(inspector_url)
    login(page, inspector_url)
    page.goto(f"{inspector_url}/ui#/s/{done}")
    page.locator("#session-status", has_text="completed").wait_for()
    for name in ("Interrupt", "Resume", "Abort"):
        assert control(page, name).is_disabled(), name
    for name in ("Retry", "Fork"):
        assert control(page, name).is_enabled(), name
    page.screenshot(path=str(tmp_path / "controls-completed.png"), full_page=True)

    # A run waiting for approvals: it can be interrupted or aborted, not retried while in flight.
    with httpx.Client(base_url=inspector_url, headers=AUTH, timeout=30) as http:
        waiting = http.post("/v1/runs", json={"agent": "gatekeeper", "input": "go"}).json()["session_id"]
        page.goto(f"{inspector_url}/ui#/s/{waiting}")
        pending_card(page, "remove").wait_for()
        snapshot = http.get(f"/v1/sessions/{waiting}").json()
        for name in ("Interrupt", "Abort"):
            assert control(page, name).is_enabled(), name
        assert control(page, "Retry").is_disabled()
        assert control(page, "Resume").is_enabled() is snapshot["can_resume"]["can_resume"]

        # Aborted elsewhere while this page was not listening: the page's Abort is refused, the
        # refusal is shown as the server gave it, and the page catches up with the session.
        page.evaluate("window.helixInspector.stream().stop()")
        # A refresh a chunk scheduled just before the stop would catch the page up after the abort.
        poll(page, "window.helixInspector.settled()")
        assert http.post(f"/v1/sessions/{waiting}/abort", json={"reason": "from the CLI"}).status_code == 200
    page.once("dialog", lambda dialog: dialog.accept())
    control(page, "Abort").click()
    expect_text(page.locator("#notice"), "state_not_resumable")
    page.locator("#session-status", has_text="failed").wait_for()
    for name in ("Interrupt", "Resume", "Abort"):
        expect_disabled(control(page, name))


def test_the_landing_page_banner_says_what_failed_and_offers_a_retry(
    page: Any, inspector_url: str, tmp_path: Path
) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, inspector_url)
    page.get_by_role("heading", name="Sessions").wait_for()
    unreachable = {"error": {"code": "transport_error", "message": "The database is unreachable.", "retryable": True}}
    page.route("**/v1/sessions?*", lambda route: route.fulfill(status=503, json=unreachable))
    page.reload()
    notice = page.locator("#notice")
    expect_text(notice, "The database is unreachable. (transport_error)")
    # The banner sits inside the page's margins, as the content does, and nothing is wider than the screen.
    box = notice.bounding_box()
    assert box["x"] >= 8 and box["x"] + box["width"] <= 390 - 8, box
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(tmp_path / "landing-503-390.png"), full_page=True)
    # Not a blank page: the operator can try again once the service is back.
    page.unroute("**/v1/sessions?*")
    page.get_by_role("button", name="Try again").click()
    page.get_by_role("heading", name="Sessions").wait_for()
    assert notice.is_hidden()
    # Logging out is news, not an error.
    page.get_by_role("button", name="Log out").click()
    expect_text(notice, "Logged out.")
    assert "info" in (notice.get_attribute("class") or "")


def expect_disabled(locator: Any, timeout: float = 15_000) -> None:
    from playwright.sync_api import expect

    expect(locator).to_be_disabled(timeout=timeout)


def poll(page: Any, expression: str, timeout: float = 15) -> None:
    """Wait until ``expression`` is true in the page (``wait_for_function`` would need the eval the
    inspector's Content-Security-Policy forbids)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {timeout}s: {expression}"
        time.sleep(0.05)


def expect_text(locator: Any, text: str, timeout: float = 15_000) -> None:
    """Wait until ``locator``'s text contains ``text`` (fails with what it shows instead)."""
    from playwright.sync_api import expect

    expect(locator).to_contain_text(text, timeout=timeout)
