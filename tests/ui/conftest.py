"""Fixtures for the web inspector's browser tests: a real ``helix-dbos serve`` and headless Chromium.

- ``inspector_url``: ``helix-dbos serve`` in its own process on a fresh PostgreSQL database, serving
  ``tests/ui/agents.py`` on its scripted model with the bearer token ``TOKEN`` (one per module);
- ``browser``: Debian's ``chromium`` driven by Playwright (no browser download is possible here, so
  Playwright is pointed at the system executable). Without it the tests skip locally with the
  reason, and fail in CI (``CI`` set): a browser suite that silently skips proves nothing;
- ``page``: a fresh browser context (its own ``sessionStorage``) at 1280 x 900, closed after the test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import pg
from tests.cli_process import CliProcess
from tests.service.conftest import free_port

TOKEN = "ui-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the browser tests need Chromium and Playwright in CI: {reason}")
    pytest.skip(reason)


def chromium_executable() -> str | None:
    """Chromium from the system's packages (``HELIX_CHROMIUM`` overrides)."""
    override = os.environ.get("HELIX_CHROMIUM")
    if override:
        return override
    for candidate in CHROMIUM_CANDIDATES:
        if Path(candidate).exists():
            return candidate
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def inspector_url(pg_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    name = pg.unique_name("helix_ui")
    url = pg.create_database(pg_server_url, name)
    port = free_port()
    server = CliProcess(
        tmp_path_factory.mktemp("serve"),
        "serve",
        "--agents",
        "tests.ui.agents:agents",
        "--llm-adapter",
        "tests.ui.agents:model",
        "--database-url",
        url,
        "--port",
        str(port),
        "--executor-id",
        "ui-tests",
        "--token",
        TOKEN,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        server.wait_for("Uvicorn running", timeout=90)
        yield base
    finally:
        # A run left waiting for an approval would hold the server's shutdown: abort what is left.
        with contextlib.suppress(httpx.HTTPError), httpx.Client(base_url=base, headers=AUTH, timeout=10) as http:
            for session in http.get("/v1/sessions", params={"status": "active", "limit": 100}).json()["items"]:
                http.post(f"/v1/sessions/{session['session_id']}/abort", json={"reason": "test teardown"})
        try:
            server.stop(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
        finally:
            pg.drop_database(pg_server_url, name)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _missing(f"Playwright is not installed ({exc}); pip install -e '.[dev]'")
    executable = chromium_executable()
    if executable is None:
        _missing("no Chromium executable (apt-get install chromium, or set HELIX_CHROMIUM)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"page error: {error}"))
    try:
        yield page
    except BaseException:
        raise
    finally:
        # Shown with a failure: what the page logged (errors of its own modules included).
        print("browser console:", *console, sep="\n  ")
        context.close()
