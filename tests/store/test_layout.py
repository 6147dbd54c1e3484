"""The store's seams, pinned: an interface module imports no implementation, and nothing reaches
across modules for private names. (A review found ``store/base.py`` importing the SQL classes, so
that no other store could exist; these tests keep it from coming back.) Module length is
``tests/unit/test_architecture.py``'s rule, with its reasoned exceptions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import helix_dbos.store

STORE = Path(helix_dbos.store.__file__).parent
MODULES = sorted(p for p in STORE.glob("*.py"))


def imports_of(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every ``import`` / ``from .. import`` in the file (any depth)."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def store_modules_imported_by(name: str) -> set[str]:
    modules = set()
    for module, names in imports_of(STORE / f"{name}.py"):
        if module == "helix_dbos.store":
            modules.update(f"helix_dbos.store.{n}" for n in names)
        elif module.startswith("helix_dbos.store."):
            modules.add(module)
    return modules


def test_the_interface_imports_no_implementation() -> None:
    assert store_modules_imported_by("base") == set()


def test_the_dialect_interface_imports_neither_dialect() -> None:
    assert store_modules_imported_by("dialect") <= {"helix_dbos.store.base"}


def test_the_optional_capabilities_import_no_implementation() -> None:
    assert store_modules_imported_by("capabilities") <= {"helix_dbos.store.base", "helix_dbos.store.dialect"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_private_names_across_modules(path: Path) -> None:
    private = [
        f"{module}.{name}"
        for module, names in imports_of(path)
        if module.startswith("helix_dbos.")
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_the_store_depends_on_no_upper_layer(path: Path) -> None:
    upper = ("helix_dbos.runtime", "helix_dbos.service", "helix_dbos.stream", "helix_dbos.cli", "helix_dbos.llm")
    assert [m for m, _ in imports_of(path) if m.startswith(upper)] == []
