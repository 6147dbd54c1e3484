"""AG-UI's own client in Node against a live ``helix-dbos serve``: the AG-UI endpoint, proven end to end.

``tests/node/agui_client.mjs`` drives ``HttpAgent`` from the pinned npm package ``@ag-ui/client``
(the agent class CopilotKit and other AG-UI front ends build on) against a real server process on
PostgreSQL with the scripted agents of ``tests/service/agents.py``: a text run streamed end to end,
a client-executed tool answered by the client in a new run (HITL), an approval answered through
the protocol's interrupt and resume, the custom state as ``STATE_SNAPSHOT`` and ``STATE_DELTA``
over two turns, a dropped connection resumed with ``Last-Event-ID`` (and a replay from the run's
start for a client holding nothing), and refusals: a typed 422, and a RUN_ERROR with the code.
The library checks the order of every event and parses each against the protocol's schema, so any
drift of the protocol fails the script.

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
def test_the_ag_ui_client_talks_to_serve(pg_database_url: str, tmp_path: Path, hot_window_seconds: str) -> None:
    """Hot: answers wake the waiting run. Parked (slow): runs park at once and an answer starts the continuation.

    About 20 s each: a server process starts (most of it), then six scenarios run through the Node client.
    """
    node = node_for("@ag-ui/client", "AG-UI client")
    summary = run_client_against_serve(node, "agui_client.mjs", pg_database_url, tmp_path, hot_window_seconds)
    assert summary["text"]["text"] == "echo: hello there"
    assert summary["clientTool"]["text"] == "Let me take a note first.Now I ask your browser.You are in Lima."
    assert summary["approval"]["text"] == 'Done: {"removed":"/tmp/x"}'
    assert summary["state"]["state"] == {"count": 10, "log": ["+2", "+3"]}
    assert summary["resume"]["text"].endswith("You are in Quito.")
    assert summary["resume"]["replayed"] == "Let me take a note first.Now I ask your browser.You are in Quito."
    assert summary["badInput"] == {"status": 422, "code": "validation_error", "inStream": "validation_error"}
