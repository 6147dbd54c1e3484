"""The package's shape, pinned: the layers import downwards only, no module imports another's private
names or forms an import cycle, and no module grows past ~600 lines without a stated reason.

A review of the first version found 600-1,300-line modules, a store interface importing its SQL
implementation, private names imported across packages and a cycle hidden behind a delayed import.
These checks keep that from coming back; ``tests/store/test_layout.py`` holds the store's own seams.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

import helix_dbos

PACKAGE = Path(helix_dbos.__file__).parent
MAX_LINES = 600

LONGER_ON_PURPOSE = {
    "runtime/executor.py": "the public facade: ~20 methods (execute/resume/retry/submit/control, their "
    "async twins), each a few lines that delegate, with the docstrings users read",
    "errors.py": "every exception of the package in one module (one root, codes, the tree in its docstring) and "
    "the helpers that classify errors and decide what a client may see",
    "store/base.py": "the whole store interface a third-party store implements: the SessionStore, PendingCallStore "
    "and WorkerRegistry protocols with the records they take and return, mostly docstrings, no code",
}
"""Modules allowed past ``MAX_LINES``, each with its reason."""

LAYERS_BELOW = {
    "orchestration": {"runtime", "service", "store", "stream", "llm", "cli", "demo"},
    "state": {"runtime", "service", "store", "stream", "llm", "cli", "demo"},
    "llm": {"runtime", "service", "store", "stream", "agent", "cli", "demo"},
    "store": {"runtime", "service", "llm", "cli", "demo"},
    "stream": {"runtime", "service", "llm", "cli", "demo"},
    "runtime": {"service", "cli"},
    "memory": {"runtime", "service", "llm", "cli", "demo"},
    "observability": {"runtime", "service", "store", "stream", "llm", "cli", "demo"},
}
"""For each package, the top-level packages/modules it must never import (imports go downwards)."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _top_level_imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of the imports run when the module is imported (not ``TYPE_CHECKING`` ones)."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def _all_imports(path: Path) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for module, names in _top_level_imports(path):
            if not module.startswith("helix_dbos"):
                continue
            submodules = {f"{module}.{n}" for n in names} & MODULES.keys()
            graph[name] |= submodules or ({module} & MODULES.keys())
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_no_import_cycle() -> None:
    assert _cycles(_import_graph()) == []


def test_the_cycle_check_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_is_imported_from_another_module(name: str) -> None:
    private = [
        f"{module}.{imported}"
        for module, names in _all_imports(MODULES[name])
        if module.startswith("helix_dbos") and module != name
        for imported in names
        if imported.startswith("_") and not imported.startswith("__") and imported != "_version"
    ]
    assert private == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_too_long_without_a_reason(name: str) -> None:
    path = MODULES[name]
    relative = path.relative_to(PACKAGE).as_posix()
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES or relative in LONGER_ON_PURPOSE, f"{relative} has {lines} lines"


@pytest.mark.parametrize("layer", sorted(LAYERS_BELOW))
def test_layers_import_downwards_only(layer: str) -> None:
    forbidden = {f"helix_dbos.{name}" for name in LAYERS_BELOW[layer]}
    offending = sorted(
        f"{name} -> {module}"
        for name, path in MODULES.items()
        if name == f"helix_dbos.{layer}" or name.startswith(f"helix_dbos.{layer}.")
        for module, _ in _all_imports(path)
        if any(module == f or module.startswith(f"{f}.") for f in forbidden)
    )
    assert offending == []


RUNTIME_ATTRIBUTE_LOOKUPS_ALLOWED = {
    ("runtime/exiting.py", "threading"): "a private helper of the standard library that may be absent",
    ("runtime/registry.py", "fn"): "a tool function's name for messages; any callable may lack it",
    ("runtime/hooks.py", "hooks"): "hook sets are partial by design: an undefined hook is skipped",
    ("runtime/hooks.py", "h"): "the same, for the check whether any hook set defines a hook",
    ("runtime/queues.py", "status"): "a field of DBOS's workflow status, absent in older DBOS versions",
    ("runtime/sub_agents.py", "validated"): "a sub-agent's output: a pydantic model or plain JSON",
}
"""``getattr`` / ``hasattr`` uses in ``runtime/`` unrelated to the backend, each with its reason.

What the store, the stream manager or ``store.pending`` offer beyond their base protocols is
declared (``store/capabilities.py``, ``stream/capabilities.py``) and resolved once, when the
executor is built (``runtime/backend.py``); the runtime asks that result instead of probing.
"""


def _attribute_lookups(path: Path) -> list[str]:
    """The source of the object each ``getattr(obj, ...)`` / ``hasattr(obj, ...)`` in ``path`` looks into."""
    return [
        ast.unparse(node.args[0])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "hasattr"}
        and node.args
    ]


def test_the_runtime_probes_no_backend_object_for_capabilities() -> None:
    found = {
        (path.relative_to(PACKAGE).as_posix(), target)
        for path in sorted((PACKAGE / "runtime").rglob("*.py"))
        for target in _attribute_lookups(path)
    }
    assert sorted(found - RUNTIME_ATTRIBUTE_LOOKUPS_ALLOWED.keys()) == []
