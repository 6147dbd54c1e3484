"""The re-consult's compare-and-set on PostgreSQL (issue 12): ``completed -> active`` at the version read.

A re-consult opens the companion's next turn with :func:`~helix_dbos.runtime.starts.next_turn`, which
allows only a ``completed`` session at the version the decision read. A second re-consult decided on
the same (now stale) view must be refused, never run a second turn on top of the first.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import BaseModel

from helix_dbos import SqlSessionStore, define_agent
from helix_dbos.errors import AgentAlreadyRunningError, StaleStateError
from helix_dbos.runtime import starts
from helix_dbos.session import AgentInput

pytestmark = pytest.mark.postgres


class Verdict(BaseModel):
    verdict: str


def test_a_reconsult_on_a_stale_view_is_refused(new_migrated_database: Callable[[str], str]) -> None:
    critic = define_agent("critic", system_prompt="judge", llm_config="openai/fake", output_schema=Verdict)
    store = SqlSessionStore(new_migrated_database("cas"))
    try:
        sid = "p-agent-critic"
        first = starts.child_first_turn(
            critic,
            sid,
            "draft one",
            parent_session_id="p",
            root_session_id="p",
            request_key="companion:c1",
            fingerprint=None,
            metadata=None,
            now_ms=1,
        )
        run = store.start_run(first).run
        store.finish_run(sid, run.run_id, session_status="completed", run_status="completed", now_ms=2)
        seen = store.load_session(sid)
        assert seen is not None and seen.status == "completed"

        def reconsult(key: str, text: str) -> starts.StartRun:
            assert seen is not None
            history = store.get_message_prefix(sid, seen.message_count)
            return starts.next_turn(
                critic,
                seen,
                AgentInput(message=text),
                history,
                request_key=key,
                fingerprint=None,
                stream_start_sequence=0,
                now_ms=3,
            )

        store.start_run(reconsult("companion:c2", "draft two"))  # completed -> active
        with pytest.raises(AgentAlreadyRunningError):  # the same stale view while the turn runs
            store.start_run(reconsult("companion:c3", "draft three"))
        current = store.get_current_run(sid)
        assert current is not None
        store.finish_run(sid, current.run_id, session_status="completed", run_status="completed", now_ms=4)
        with pytest.raises(StaleStateError):  # completed again, but not at the version the decision read
            store.start_run(reconsult("companion:c3", "draft three"))
        texts = [m.content for m in store.get_messages(sid, limit=50).messages]
        assert texts.count("draft two") == 1 and "draft three" not in texts
        assert store.start_run(reconsult("companion:c2", "draft two")).existing  # a re-executed step: its own run
    finally:
        store.close()
