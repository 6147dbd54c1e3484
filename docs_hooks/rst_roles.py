"""MkDocs hook: render the docstrings' reST cross-reference roles as inline code.

The code's docstrings are written with Sphinx roles (``:class:`~helix_dbos.errors.HelixError```,
``:func:``, ``:meth:``, ...). mkdocstrings' sphinx parser leaves the role name in the text, so the
API pages would show ``:class:`` before every reference. This hook drops the role and keeps the
reference as code, shortening ``~a.b.C`` to ``C`` as Sphinx does.
"""

from __future__ import annotations

import re
from typing import Any

ROLES = ("class", "func", "meth", "data", "mod", "attr", "exc", "obj", "const")

# After Markdown, a role is its name followed by the code span of its target.
_HTML_ROLE = re.compile(rf":(?:py:)?(?:{'|'.join(ROLES)}):<code>(~?)([^<]*)</code>")


def _target(tilde: str, target: str) -> str:
    return target.rsplit(".", 1)[-1] if tilde else target


def strip_roles(html: str) -> str:
    """Return ``html`` with every ``:role:<code>target</code>`` turned into ``<code>target</code>``."""
    return _HTML_ROLE.sub(lambda m: f"<code>{_target(m.group(1), m.group(2))}</code>", html)


def on_page_content(html: str, **kwargs: Any) -> str:
    return strip_roles(html)
