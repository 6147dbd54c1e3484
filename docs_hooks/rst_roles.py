"""MkDocs hook: render the docstrings' reST cross-reference roles as links to the objects they name.

The code's docstrings are written with Sphinx roles (``:class:`~helix_dbos.errors.HelixError```,
``:func:``, ``:meth:``, ...). mkdocstrings' sphinx parser leaves the role name in the text, so the
API pages would show ``:class:`` before every reference. This hook drops the role and turns the
reference into a cross-reference of mkdocs-autorefs (what mkdocstrings' own
``[Name][helix_dbos.Name]`` references become), shortening ``~a.b.C`` to ``C`` as Sphinx does.

Two passes, because a reference may name an object documented on a later page:

1. ``on_page_content``: each role becomes a placeholder holding the identifiers it may mean, and
   the identifiers of the objects the page documents (mkdocstrings' headings) are collected;
2. ``on_env`` (before autorefs' own, which runs late): each placeholder becomes an autoref to the
   first of its identifiers that some page documents, or, when none is, to the target as written
   (autorefs also knows an object by its canonical path). The autoref is ``optional``: one that
   still resolves nowhere renders as inline code without a warning, so ``--strict`` builds pass.

The identifiers a target may mean, in order: a full ``helix_dbos.x.Y`` as written; a bare name
(``close``) in the documented object whose docstring holds it (a class's members, a method's
siblings), then in each enclosing module up to the top-level API (``helix_dbos.AgentHooks``); a
dotted name (``DBOSAgentExecutor.resume``) under the same scopes, then as written. A target
relative to its module (``.starting``) stays code: the module is not known here. Sphinx's explicit
title (``:meth:`from_env <helix_dbos.settings.HelixSettings.from_env>```) shows the title.
"""

from __future__ import annotations

import bisect
import html as html_lib
import re
from typing import Any

ROLES = ("class", "func", "meth", "data", "mod", "attr", "exc", "obj", "const")
PACKAGE = "helix_dbos"

# After Markdown, a role is its name followed by the code span of its target.
_HTML_ROLE = re.compile(rf":(?:py:)?(?:{'|'.join(ROLES)}):<code>(~?)([^<]*)</code>")
# mkdocstrings' heading of a documented object: its identifier, then its kind.
_HEADING = re.compile(
    r'<h[1-6] id="([^"]+)" class="doc doc-heading">\s*<span class="doc doc-object-name doc-(\w+)-name">'
)
_PLACEHOLDER = re.compile(r'<helix-ref data-candidates="([^"]*)">(.*?)</helix-ref>', flags=re.DOTALL)
# Sphinx's explicit title, ``:meth:`title <target>```, after Markdown escaped its brackets.
_EXPLICIT_TITLE = re.compile(r"(.*?)\s*&lt;(.+)&gt;", flags=re.DOTALL)
_CONTAINERS = ("class", "module")

_documented: set[str] = set()
"""The identifiers of every object some page of this build documents."""


def _title(tilde: str, target: str) -> str:
    return target.rsplit(".", 1)[-1] if tilde else target


def candidates(target: str, scope: str | None) -> list[str]:
    """The identifiers ``target`` may mean, most specific first (see the module docstring)."""
    if target == PACKAGE or target.startswith(f"{PACKAGE}."):
        return [target]
    scopes: list[str] = []
    while scope and (scope == PACKAGE or scope.startswith(f"{PACKAGE}.")):
        scopes.append(scope)
        scope = scope.rsplit(".", 1)[0] if "." in scope else None
    if PACKAGE not in scopes:
        scopes.append(PACKAGE)
    found = [f"{s}.{target}" for s in scopes]
    return found if "." not in target else [*found, target]


def _scopes(html: str) -> tuple[list[int], list[str]]:
    """Where each documented object's heading starts, and the object its members are named in."""
    starts: list[int] = []
    scopes: list[str] = []
    for heading in _HEADING.finditer(html):
        identifier, kind = heading.group(1), heading.group(2)
        starts.append(heading.start())
        scopes.append(identifier if kind in _CONTAINERS else identifier.rsplit(".", 1)[0])
    return starts, scopes


def mark_roles(html: str) -> str:
    """Pass 1: every ``:role:<code>target</code>`` becomes a placeholder with its candidate identifiers."""
    starts, scopes = _scopes(html)

    def replace(match: re.Match[str]) -> str:
        tilde, target = match.group(1), " ".join(match.group(2).split())
        explicit = _EXPLICIT_TITLE.fullmatch(target)
        if explicit:
            title, target = explicit.group(1), explicit.group(2)
        else:
            title = _title(tilde, target)
        code = f"<code>{title}</code>"
        if not target or target.startswith("."):
            return code
        at = bisect.bisect_right(starts, match.start()) - 1
        found = candidates(target, scopes[at] if at >= 0 else None)
        return f'<helix-ref data-candidates="{html_lib.escape(" ".join(found))}">{code}</helix-ref>'

    return _HTML_ROLE.sub(replace, html)


def link_marks(html: str, documented: set[str]) -> str:
    """Pass 2: each placeholder becomes an optional autoref to the first documented candidate."""

    def replace(match: re.Match[str]) -> str:
        found = html_lib.unescape(match.group(1)).split()
        picked = next((c for c in found if c in documented), found[-1])
        return f'<autoref identifier="{html_lib.escape(picked)}" optional>{match.group(2)}</autoref>'

    return _PLACEHOLDER.sub(replace, html)


def on_pre_build(**kwargs: Any) -> None:
    _documented.clear()  # ``mkdocs serve`` builds again in the same process


def on_page_content(html: str, **kwargs: Any) -> str:
    _documented.update(m.group(1) for m in _HEADING.finditer(html))
    return mark_roles(html)


def on_env(env: Any, *, config: Any, files: Any) -> Any:
    for file in files:
        if file.page is not None and file.page.content:
            file.page.content = link_marks(file.page.content, _documented)
    return env
