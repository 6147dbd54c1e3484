"""The documentation site's promises hold: every Python block of every ``docs/`` page runs, shows only
public names, the API reference covers both tiers exactly, and ``mkdocs build --strict`` passes.

Each block runs in a fresh interpreter in an empty directory (the embedded SQLite default), so a
block cannot lean on another block's state or on this test process's DBOS.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import helix_dbos
from tests.unit.test_public_api import SUBPACKAGE_NAMES

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = {page.name: page.read_text() for page in sorted(DOCS.glob("*.md"))}


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


BLOCKS = [(name, i, block) for name, text in PAGES.items() for i, block in enumerate(python_blocks(text))]


def block_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "HELIX_EXECUTOR_ID")}
    env["PYTHONPATH"] = str(REPO)
    return env


def run_block(block: str, where: str, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(block)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=block_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"{where} failed:\n{block}\n--- output ---\n{proc.stdout}{proc.stderr}"


def assert_public_names_only(blocks: list[str]) -> None:
    """What the docs show is public API: top-level names, a public subpackage's ``__all__``, or a
    seeds' helper from its pinned home; never an internal module or a reach through the executor."""
    imports = re.findall(r"^from (helix_dbos[\w.]*) import \(?([^)]*?)\)?$", "\n".join(blocks), flags=re.M | re.S)
    assert imports
    for module, names in imports:
        for name in (n.strip() for n in names.replace("\n", ",").split(",") if n.strip()):
            if module == "helix_dbos":
                assert name in helix_dbos.__all__, name
            elif module in ("helix_dbos.service", "helix_dbos.testing"):
                assert name in importlib.import_module(module).__all__, (module, name)
            else:
                assert SUBPACKAGE_NAMES.get(name) == module, (module, name)
    for block in blocks:
        assert ".store." not in block  # an executor's store is internal; the executor has the public calls


def test_docs_have_python_blocks() -> None:
    assert len(BLOCKS) >= 15


@pytest.mark.parametrize(("page", "index"), [(name, i) for name, i, _ in BLOCKS], ids=lambda v: str(v))
def test_docs_python_block_runs(page: str, index: int, tmp_path: Path) -> None:
    run_block(python_blocks(PAGES[page])[index], f"docs/{page} block {index}", tmp_path)


def test_docs_code_uses_only_public_names() -> None:
    assert_public_names_only([block for _, _, block in BLOCKS])


def test_api_page_lists_exactly_the_top_level_api() -> None:
    page = PAGES["api.md"]
    table = page.split("| Area | Top-level names |", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`(\w+)`", table)) == set(helix_dbos.__all__)
    assert f"({len(helix_dbos.__all__)} names" in page


def _members(page: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for module, body in re.findall(r"^::: ([\w.]+)\n((?:    .*\n)+)", PAGES[page], flags=re.M):
        found[module] = set(re.findall(r"^        - (\w+)$", body, flags=re.M))
    return found


def test_api_reference_pages_cover_both_tiers() -> None:
    """The mkdocstrings pages render exactly the pinned public names: ``__all__`` on one page, each
    subpackage's names (and the ``service`` and ``testing`` ``__all__``) on the other."""
    assert _members("api-top-level.md") == {"helix_dbos": set(helix_dbos.__all__) - {"__version__"}}
    expected: dict[str, set[str]] = {}
    for name, module in SUBPACKAGE_NAMES.items():
        expected.setdefault(module, set()).add(name)
    for module in ("helix_dbos.service", "helix_dbos.testing"):
        expected.setdefault(module, set()).update(importlib.import_module(module).__all__)
    assert _members("api-subpackages.md") == expected


def test_every_page_is_in_the_nav() -> None:
    nav = (REPO / "mkdocs.yml").read_text().split("\nnav:", 1)[1]
    assert set(re.findall(r"([\w-]+\.md)$", nav, flags=re.M)) == set(PAGES)


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or shutil.which("mkdocs") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("mkdocs is not installed: pip install -e '.[dev]' (CI must build the docs)")
        pytest.skip("mkdocs is not installed: pip install -e '.[dev]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "api-top-level" / "index.html").exists()
    # The docstrings' reST roles render as links (docs_hooks/rst_roles.py), never as raw role text.
    for page in ("api-top-level", "api-subpackages"):
        html = (tmp_path / "site" / page / "index.html").read_text()
        assert ":class:" not in html, page
        assert not re.search(r":(?:func|meth|data|mod|attr|exc):<code>", html), page
        assert "<helix-ref" not in html and "<autoref" not in html, page  # every placeholder resolved
    top = (tmp_path / "site" / "api-top-level" / "index.html").read_text()
    # Every top-level name is rendered (helix_dbos.runtime's too: it is a regular package).
    rendered = set(re.findall(r'<h3 id="helix_dbos\.(\w+)" class="doc doc-heading">', top))
    assert rendered == set(helix_dbos.__all__) - {"__version__"}
    # A role naming a documented object links to it: ``:class:`SessionStore``` in DBOSAgentExecutor's
    # docstring, a bare name resolved in the top-level API.
    assert re.search(
        r'<a class="autorefs autorefs-internal"[^>]* href="#helix_dbos\.SessionStore"><code>SessionStore</code></a>',
        top,
    )


def test_rst_roles_become_cross_references_to_documented_objects() -> None:
    spec = importlib.util.spec_from_file_location("rst_roles", REPO / "docs_hooks" / "rst_roles.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    heading = '<h3 id="helix_dbos.Foo" class="doc doc-heading">\n<span class="doc doc-object-name doc-class-name">'
    html = (
        f"{heading}<p>Raise :class:<code>~helix_dbos.errors.HelixError</code> from :meth:<code>to_dict</code>"
        " or :meth:<code>close</code>, see :mod:<code>.starting</code>"
        " and :meth:<code>from_env\n&lt;helix_dbos.Foo.from_env&gt;</code>.</p>"
    )
    marked = hook.mark_roles(html)
    assert ":class:" not in marked and ":meth:" not in marked
    assert "see <code>.starting</code> and" in marked  # relative to an unknown module: code
    documented = {"helix_dbos.Foo", "helix_dbos.Foo.close", "helix_dbos.to_dict"}
    linked = hook.link_marks(marked, documented)
    # The first documented candidate wins: the class's own member, then the top-level API.
    assert '<autoref identifier="helix_dbos.Foo.close" optional><code>close</code></autoref>' in linked
    assert '<autoref identifier="helix_dbos.to_dict" optional><code>to_dict</code></autoref>' in linked
    assert '<autoref identifier="helix_dbos.Foo.from_env" optional><code>from_env</code></autoref>' in linked
    # A full path nobody documents under that name is passed on as written (autorefs knows aliases),
    # optional: if it resolves nowhere it stays inline code, without a warning.
    assert '<autoref identifier="helix_dbos.errors.HelixError" optional><code>HelixError</code></autoref>' in linked
    assert hook.candidates("close", "helix_dbos.stream.base.StreamWriter") == [
        "helix_dbos.stream.base.StreamWriter.close",
        "helix_dbos.stream.base.close",
        "helix_dbos.stream.close",
        "helix_dbos.close",
    ]
