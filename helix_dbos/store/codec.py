r"""Storing any text the model or a tool produces: a reversible escape for what PostgreSQL refuses.

Text that no client controls (model output, tool results, error messages) reaches the store and the
stream tables verbatim, and two kinds of Python string cannot be stored as they are:

- ``"\\x00"`` (NUL): PostgreSQL ``text`` refuses the byte, ``jsonb`` and every JSON function refuse
  the escape ``\\u0000`` ("unsupported Unicode escape sequence", SQLSTATE 22P05). Plain ``json``
  columns accept it, but the statements that unpack a batch with ``json_array_elements`` do not;
- lone surrogates (``"\\ud800"``, which a provider's JSON ``"\\ud800"`` escape decodes to): they
  cannot be encoded as UTF-8 at all, so neither the driver nor SQLite nor ``pydantic_core`` can send
  them, and PostgreSQL's JSON parser refuses the escape as well.

Rather than drop or replace such characters (which would change a transcript that is replayed to
the model, or a tool result a user asked for), the store escapes them, reversibly:

    ESCAPE = U+FDD0 (a Unicode *noncharacter*, "permanently reserved for internal use")
    a character c in {NUL, U+D800..U+DFFF, ESCAPE}  is stored as  ESCAPE + format(ord(c), "04x")

so ``"a\\x00b"`` is stored as ``"a\\ufdd00000b"`` and ``"\\ufdd0"`` itself as ``"\\ufdd0fdd0"``.
Every ESCAPE in stored text starts such a five-character group, which makes decoding unambiguous:
:func:`unescape_text` turns each group back into its character, and ``unescape(escape(s)) == s`` for
every Python string ``s``. Text without those characters (all but pathological text) is stored
byte for byte, and the checks that decide so are substring scans on the serialised JSON: the
common path costs one ``in`` per document.

The escape applies to every string in a stored JSON document (object keys included) and to the
text columns that hold produced text (errors, tool names in usage). The store decodes on every
read, so callers of the store and of the stream readers never see it; a tool reading the tables
directly sees the escaped form.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import pydantic_core
import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Dialect

__all__ = [
    "ESCAPE",
    "EscapedString",
    "EscapedText",
    "dumps",
    "escape_json_text",
    "escape_text",
    "escape_value",
    "loads",
    "unescape_text",
    "unescape_value",
]

ESCAPE: Final = "\ufdd0"
"""Starts every escaped character in stored text (see the module docstring)."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff\ufdd0]")
_ESCAPED = re.compile("\ufdd0([0-9a-f]{4})")
# A JSON text needs the slow path when it holds a \u escape of NUL or of a surrogate (a valid
# surrogate *pair* is rewritten too, harmlessly: it decodes to the same astral character) or the
# escape character itself. A doubled backslash before "u" is a literal backslash; rare, and the slow
# path then finds nothing to do.
_JSON_NEEDS_ESCAPING = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})|\ufdd0")


def _escape_match(match: re.Match[str]) -> str:
    return f"{ESCAPE}{ord(match.group()):04x}"


def _unescape_match(match: re.Match[str]) -> str:
    return chr(int(match.group(1), 16))


def escape_text(text: str) -> str:
    """Return ``text`` with NUL, lone surrogates and ``ESCAPE`` escaped (itself when it has none)."""
    if text.isascii():
        return text.replace("\x00", f"{ESCAPE}0000") if "\x00" in text else text
    return _UNSTORABLE.sub(_escape_match, text)


def unescape_text(text: str) -> str:
    """Undo :func:`escape_text`."""
    return _ESCAPED.sub(_unescape_match, text) if ESCAPE in text else text


def escape_value(value: Any) -> Any:
    """:func:`escape_text` applied to every string (and object key) in a JSON-like value.

    Pydantic models are dumped first (in Python mode, which passes strings through untouched);
    other values (numbers, datetimes, UUIDs) are left for the JSON serialiser.
    """
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, dict):
        return {escape_text(k) if isinstance(k, str) else k: escape_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [escape_value(v) for v in value]
    if isinstance(value, BaseModel):
        return escape_value(value.model_dump(mode="python"))
    return value


def unescape_value(value: Any) -> Any:
    """:func:`unescape_text` applied to every string (and object key) in a JSON-like value."""
    if isinstance(value, str):
        return unescape_text(value)
    if isinstance(value, dict):
        return {unescape_text(k) if isinstance(k, str) else k: unescape_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unescape_value(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """Serialise ``value`` to JSON that every column and JSON function of both backends accepts.

    ``pydantic_core`` serialises what ``json.dumps`` cannot (datetimes, models, UUIDs) and is fast;
    a lone surrogate makes it fail, and that (rare) case takes the escaping path.
    """
    try:
        text = pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError:
        return pydantic_core.to_json(escape_value(value)).decode()
    return escape_json_text(text)


def escape_json_text(text: str) -> str:
    """Return JSON ``text`` with its strings escaped for storage (``text`` itself in the common case)."""
    if "\\u" not in text and ESCAPE not in text:
        return text
    if _JSON_NEEDS_ESCAPING.search(text) is None:
        return text
    return pydantic_core.to_json(escape_value(json.loads(text))).decode()


def loads(text: str | bytes) -> Any:
    """Parse stored JSON text, undoing the escape (the inverse of :func:`dumps`)."""
    if isinstance(text, bytes):
        text = text.decode()
    value = json.loads(text)
    return unescape_value(value) if ESCAPE in text else value


class _Escaped(sa.types.TypeDecorator[str]):
    """Stores produced text through :func:`escape_text` and reads it back (subclasses pick the column type)."""

    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        """Escape on the way in."""
        return None if value is None else escape_text(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        """Unescape on the way out."""
        return None if value is None else unescape_text(value)


class EscapedText(_Escaped):
    """A ``TEXT`` column holding produced text (an error message), escaped as the module describes."""

    impl = sa.Text
    cache_ok = True


class EscapedString(_Escaped):
    """A ``VARCHAR`` column (declared ``sa.String()``) holding produced text (a tool name), escaped."""

    impl = sa.String
    cache_ok = True
