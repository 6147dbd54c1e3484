"""The sessions a caller's own key names are persisted ids: their format is a contract.

A chat id, an AG-UI thread id and an idempotency key each map to one session through
:func:`~helix_dbos.runtime.ids.scoped_session_id`; a change of the derivation would strand every
existing chat and thread on a session no request finds again.
"""

from __future__ import annotations

from helix_dbos.runtime.ids import scoped_session_id, session_id_for_key
from helix_dbos.service.agui import thread_session_id
from helix_dbos.service.ui_chat import chat_session_id


def test_ids_derived_from_a_callers_key_keep_their_recorded_format() -> None:
    assert thread_session_id("thread-1", "bearer:alice") == "agui-fdb89574590a38746a4ec6a383138dcdecbe4274"
    assert chat_session_id("chat-1", "bearer:alice") == "chat-0e7e144682bebc3321591bf7cf4244a4bdb76888"
    assert session_id_for_key("key-1", "bearer:alice") == "idem-2637b4e9108fbe2201c46c8a00383a9512bb7e28"


def test_the_prefix_keeps_protocols_apart_and_the_scope_keeps_callers_apart() -> None:
    assert scoped_session_id("agui", "k", "s") != scoped_session_id("chat", "k", "s")
    assert scoped_session_id("chat", "k", "alice") != scoped_session_id("chat", "k", "bob")
