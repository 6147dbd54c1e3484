"""Pure logic: which client text is refused, and what of an error a client may see."""

from __future__ import annotations

import socket

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from helix_dbos.errors import HelixError, InvalidTextError, database_error_kind, public_error_message
from helix_dbos.messages import UserInputMessage
from helix_dbos.session import AgentInput
from helix_dbos.validation import check_text, find_invalid_text, text_problem


def test_nul_and_lone_surrogates_are_refused_and_pairs_are_not() -> None:
    assert text_problem("plain") is None
    assert text_problem("emoji \U0001f600 and \ufffd") is None
    assert "NUL" in (text_problem("a\x00") or "")
    for lone in ("\ud800", "x\udbff", "\udc00y", "\udfff"):
        assert "surrogate" in (text_problem(lone) or "")


def test_find_walks_json_and_models_keys_included() -> None:
    assert find_invalid_text({"a": [1, "ok", {"b": None}]}) is None
    assert find_invalid_text({"a": [1, "ok", {"b": "x\x00"}]}, ("body",)) == (
        ("body", "a", 2, "b"),
        find_invalid_text("x\x00")[1],  # type: ignore[index]
    )
    where, problem = find_invalid_text({"ok": {"bad\x00key": 1}}) or ((), "")
    assert where == ("ok", "bad\x00key") and problem.startswith("the key")
    model = AgentInput(message=[UserInputMessage(content="hi", metadata={"deep": ["\ud800"]})])
    assert find_invalid_text(model, ("input",)) == (
        ("input", "message", 0, "metadata", "deep", 0),
        find_invalid_text("\ud800")[1],  # type: ignore[index]
    )


def test_deep_documents_do_not_exhaust_the_stack() -> None:
    value: object = "x\x00"
    for _ in range(50_000):
        value = [value]
    found = find_invalid_text(value)
    assert found is not None and len(found[0]) == 50_000


def test_check_text_raises_a_coded_error_naming_the_argument() -> None:
    check_text(input="fine", session_id=None, reason="ok")
    with pytest.raises(InvalidTextError) as caught:
        check_text(input="fine", reason={"why": "bad\x00"})
    error = caught.value
    assert isinstance(error, HelixError) and isinstance(error, ValueError)
    assert error.code == "validation_invalid_text" and error.category == "validation" and not error.retryable
    assert error.location == ("reason", "why")
    assert "\x00" not in error.message and "reason.why" in error.message


class _Free(BaseModel):
    data: dict[str, object]


@given(st.recursive(st.text() | st.integers() | st.none(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)))
def test_find_agrees_with_a_plain_scan(value: object) -> None:
    def strings(v: object) -> list[str]:
        if isinstance(v, str):
            return [v]
        if isinstance(v, list):
            return [s for item in v for s in strings(item)]
        if isinstance(v, dict):
            return [s for k, item in v.items() for s in (k, *strings(item))]
        return []

    bad = any("\x00" in s or any(0xD800 <= ord(c) <= 0xDFFF for c in s) for s in strings(value))
    assert (find_invalid_text(value) is not None) == bad
    assert (find_invalid_text(_Free(data={"v": value})) is not None) == bad


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _raised(action: object) -> BaseException:
    try:
        action()  # type: ignore[operator]
    except Exception as exc:
        return exc
    raise AssertionError("expected an error")


def _refused_connection() -> None:
    with sa.create_engine(f"postgresql+psycopg://helix:pw-s3cret@127.0.0.1:{_closed_port()}/db").connect():
        pass


def _bad_statement() -> None:
    with sa.create_engine("sqlite://").connect() as conn:
        conn.execute(sa.text("SELECT * FROM missing_secret_table WHERE token = :t"), {"t": "param-s3cret"})


def test_database_errors_become_safe_messages_from_the_exception_or_its_text() -> None:
    refused = _raised(_refused_connection)
    statement = _raised(_bad_statement)
    assert database_error_kind(refused) == "unavailable" and database_error_kind(statement) == "error"
    # The way a run records its failure: "Type: message".
    for raw in (refused, statement, f"{type(refused).__name__}: {refused}", f"{type(statement).__name__}: {statement}"):
        safe = public_error_message(raw)
        for secret in ("127.0.0.1", "pw-s3cret", "SELECT", "missing_secret_table", "param-s3cret", "sqlalche.me"):
            assert secret not in safe, (secret, safe)
        assert "database" in safe.lower() and "OperationalError" in safe
        assert public_error_message(safe) == safe  # idempotent: stored text can be passed again
    assert "Retry" in public_error_message(refused)
    wrapped = HelixError("Storing 3 stream chunk(s) failed: " + str(statement), code="transport_error")
    assert "param-s3cret" not in public_error_message(wrapped)


def test_other_messages_keep_their_text_without_database_urls_or_credentials() -> None:
    assert public_error_message(None) == "failed"
    assert public_error_message(ValueError("bad input")) == "ValueError: bad input"
    assert public_error_message(HelixError("Tool 'x' failed: boom", code="tool_execution_failed")) == (
        "Tool 'x' failed: boom"
    )
    text = "cannot reach postgresql+psycopg://u:p@db.internal:5432/helix nor https://user:tok@api.example/v1 ok"
    assert public_error_message(text) == "cannot reach <database url> nor <url> ok"
    assert database_error_kind("the model refused") is None
