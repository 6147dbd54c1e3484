"""The AI SDK's own chat client in Node against a live ``helix-dbos serve``: the protocol, proven end to end.

``tests/node/ui_chat_client.mjs`` drives ``AbstractChat`` (the engine of React's ``useChat``) with
``DefaultChatTransport`` from the pinned npm package ``ai`` against a real server process on
PostgreSQL with the scripted agents of ``tests/service/agents.py``: a streamed text reply (and a
repeated post finding the same run), a client-executed tool answered in the browser, an approval
granted and one denied, and a dropped stream resumed by a new client. The library validates every
part against its own schema, so any drift of the protocol fails the script.

Needs ``tests/node/node_modules`` (see :mod:`tests.service.node_client`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.node_client import node_for, run_client_against_serve

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize(
    "hot_window_seconds", ["60", pytest.param("0.2", marks=pytest.mark.slow)], ids=["hot", "parked"]
)
def test_the_ai_sdk_chat_client_talks_to_serve(pg_database_url: str, tmp_path: Path, hot_window_seconds: str) -> None:
    """Hot: answers wake the waiting run. Parked (slow): runs park at once and an answer starts the continuation.

    About 25 s each: a server process starts, then five conversations run through the Node client.
    """
    node = node_for("ai", "AI SDK client")
    summary = run_client_against_serve(node, "ui_chat_client.mjs", pg_database_url, tmp_path, hot_window_seconds)
    assert summary["clientTool"]["text"] == "Let me take a note first.Now I ask your browser.You are in Lima."
    assert summary["approved"] == {"text": 'Done: {"removed":"/tmp/x"}', "state": "output-available"}
    assert summary["denied"]["state"] == "output-denied"
    assert "You are in Quito." in summary["resume"]["text"]
