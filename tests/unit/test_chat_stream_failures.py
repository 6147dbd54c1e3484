"""What the chat protocols' streams (AI SDK, AG-UI) tell a client when reading the run's stream fails.

Both routes answer through :func:`~helix_dbos.service.sse.read_failure`: truncation asks for a
reconnect, a typed error shows its safe text and code, anything else only "Internal server error"
(the details go to the log, never to the client).
"""

from __future__ import annotations

import logging

import pytest

from helix_dbos.errors import HelixError, StreamTruncatedError
from helix_dbos.service.sse import read_failure


def test_truncation_asks_the_client_to_reconnect() -> None:
    message, code = read_failure(StreamTruncatedError("s", 4, 2), "reply")
    assert message == "Part of this reply was removed by crash recovery: reconnect to read it again"
    assert code is None


def test_a_typed_error_shows_its_code() -> None:
    message, code = read_failure(HelixError("the run failed: boom", code="provider_refused"), "run")
    assert (message, code) == ("the run failed: boom", "provider_refused")


def test_an_unexpected_error_is_logged_and_shown_only_as_internal(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="helix_dbos.service"):
        message, code = read_failure(RuntimeError("postgresql://user:secret@db/helix"), "run")
    assert (message, code) == ("Internal server error", None)
    assert "secret" not in message and "reading the stream of a run failed" in caplog.text
