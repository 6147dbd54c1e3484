r"""Client-supplied text: refuse NUL and lone surrogates, anywhere in it, before anything is written.

Two kinds of string cannot be stored faithfully, so they are refused where they enter:

- **NUL** (U+0000): PostgreSQL's ``text`` and ``jsonb`` cannot hold it. Accepted, it failed the
  write that stored it later, mid-run, and in a batched write (stream chunks) it failed other
  sessions' data with it (issue 9).
- **Lone surrogates** (U+D800-U+DFFF not part of a pair, which JSON can carry as ``"\ud800"``):
  they are not Unicode scalar values, so no UTF-8 encoder (the database driver's included) can
  write them. A surrogate *pair* in JSON decodes to one ordinary character and is fine.

Every string is checked: values, and the keys of objects, recursively through JSON-like data and
pydantic models. :func:`check_text` raises :class:`~helix_dbos.errors.InvalidTextError` naming the
first offending location; the HTTP service answers it with a 422 (code ``validation_invalid_text``),
and the executor's public entry points call it first, so nothing is written.

Text that models and tools produce is not the client's to fix and is not checked here: the run
stores it (see the store for how).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from helix_dbos.errors import InvalidTextError

Location = tuple[str | int, ...]
"""Where a value sits: object keys and list indexes from the root (``("input", "message", 0)``)."""

_INVALID = re.compile("[\x00\ud800-\udfff]")

TEXT_PATTERN = "^[^\\u0000]*$"
"""The JSON Schema ``pattern`` of accepted text (used in the OpenAPI schema). Lone surrogates are not
strings in JSON Schema's sense (I-JSON, RFC 7493, forbids them), so only NUL needs saying."""


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be accepted, or ``None`` when it can."""
    match = _INVALID.search(text)
    if match is None:
        return None
    char = match.group()
    if char == "\x00":
        return "it contains NUL (\\u0000), which cannot be stored; remove it"
    return (
        f"it contains a lone surrogate (\\u{ord(char):04x}), which is not Unicode text; "
        "send characters outside the BMP as a surrogate pair or as UTF-8"
    )


def find_invalid_text(value: Any, location: Location = ()) -> tuple[Location, str] | None:
    """The first string in ``value`` (keys included) that cannot be accepted, and why.

    Walks dicts, lists, tuples, sets and pydantic models without recursion, so a deeply nested
    document cannot exhaust the stack.
    """
    stack: list[tuple[Any, Location]] = [(value, location)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, str):
            problem = text_problem(current)
            if problem is not None:
                return where, problem
        elif isinstance(current, Mapping):
            items = list(current.items())
            for key, item in reversed(items):
                if isinstance(key, str):
                    problem = text_problem(key)
                    if problem is not None:
                        return (*where, key), "the key " + problem.removeprefix("it ")
                stack.append((item, (*where, key if isinstance(key, str | int) else str(key))))
        elif isinstance(current, list | tuple):
            stack.extend((item, (*where, index)) for index, item in reversed(list(enumerate(current))))
        elif isinstance(current, set | frozenset):
            stack.extend((item, where) for item in current)
        elif isinstance(current, BaseModel):
            fields = dict(current.__dict__)
            if current.__pydantic_extra__:
                fields.update(current.__pydantic_extra__)
            stack.extend((item, (*where, name)) for name, item in reversed(list(fields.items())))
    return None


def check_text(**values: Any) -> None:
    """Raise :class:`InvalidTextError` for the first argument holding text that cannot be accepted.

    ``check_text(session_id=session_id, input=input)``: each keyword is the root of the reported
    location.
    """
    for name, value in values.items():
        found = find_invalid_text(value, (name,))
        if found is not None:
            raise InvalidTextError(*found)


__all__ = ["TEXT_PATTERN", "Location", "check_text", "find_invalid_text", "text_problem"]
