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
    "errors.py": "every exception of the package in one module (one root, codes, the tree in its docstring); "
    "classifying errors and what a client may see is error_policy.py",
    "store/base.py": "the whole store interface a third-party store implements: the SessionStore, PendingCallStore "
    "and WorkerRegistry protocols with the records they take and return, mostly docstrings, no code",
    "runtime/executor.py": "the public facade: one method (and its async twin) per operation of the seeds' "
    "executor, each with its contract in its docstring, delegating to client.py, starting.py and control.py",
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


SETTINGS_MODULE = "helix_dbos.settings"
"""The one module that reads ``HELIX_*`` variables (``HelixSettings.from_env``)."""

ENVIRONMENT_READS_ALLOWED: dict[str, str] = {}
"""Other modules allowed to read a ``HELIX_*`` variable, each with its reason (none today)."""


def _helix_environment_reads(source: str) -> list[str]:
    """The ``HELIX_*`` variables ``source`` reads from the environment itself (or ``NAME_ENV`` constants).

    Reads are ``os.environ[...]`` / ``.get`` / ``.setdefault`` / ``.pop``, ``os.getenv``, and a
    Click/Typer option's ``envvar=``: each one bypasses ``HelixSettings``.
    """
    tree = ast.parse(source)
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    keys: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            reads = ast.unparse(func) in {"os.getenv", "getenv"} or (
                isinstance(func, ast.Attribute)
                and func.attr in {"get", "setdefault", "pop"}
                and "environ" in ast.unparse(func.value)
            )
            if reads and node.args:
                keys.append(node.args[0])
            keys.extend(kw.value for kw in node.keywords if kw.arg == "envvar")
        elif isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
            keys.append(node.slice)
    found = []
    for key in keys:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            name = key.value
        elif isinstance(key, ast.Name):
            name = constants.get(key.id, key.id if key.id.endswith("_ENV") else "")
        else:
            continue
        if name.startswith("HELIX_") or name.endswith("_ENV"):
            found.append(name)
    return found


def test_only_the_settings_module_reads_helix_variables() -> None:
    found = {
        name: reads
        for name, path in MODULES.items()
        if name != SETTINGS_MODULE and name not in ENVIRONMENT_READS_ALLOWED
        if (reads := _helix_environment_reads(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_environment_check_sees_each_kind_of_read() -> None:
    source = """
import os
from os import environ
URL_ENV = "HELIX_DATABASE_URL"
a = os.environ.get("HELIX_A")
b = os.environ["HELIX_B"]
c = os.getenv(URL_ENV)
d = (environ if environ is not None else dict(os.environ)).get(RETRY_SECONDS_ENV, "")
e = typer.Option("--x", envvar="HELIX_E")
f = os.environ.get("OTEL_SERVICE_NAME")
"""
    assert _helix_environment_reads(source) == [
        "HELIX_A",
        "HELIX_B",
        "HELIX_DATABASE_URL",
        "RETRY_SECONDS_ENV",
        "HELIX_E",
    ]


FORBIDDEN_EDGES = {
    ("helix_dbos.service", "helix_dbos.cli"): "the HTTP face and the command line share helix_dbos.views, "
    "neither imports the other",
    ("helix_dbos.runtime.launch", "helix_dbos.demo"): "the demo registers its model (helix_dbos.llm.builtin); "
    "the runtime does not know it",
    ("helix_dbos.runtime.recovery", "helix_dbos.runtime.loop"): "recovery needs the workflow's name "
    "(step_names.AGENT_WORKFLOW_NAME), not the loop",
    ("helix_dbos.runtime.recovery", "helix_dbos.runtime.workflow"): "importing the workflow imports the loop",
}
"""Imports that once existed and must not come back (delayed imports included), each with its reason."""


@pytest.mark.parametrize(("importer", "imported"), sorted(FORBIDDEN_EDGES))
def test_a_removed_edge_stays_removed(importer: str, imported: str) -> None:
    offending = sorted(
        f"{name} -> {module}"
        for name, path in MODULES.items()
        if name == importer or name.startswith(f"{importer}.")
        for module, names in _all_imports(path)
        for target in [module, *(f"{module}.{n}" for n in names)]
        if target == imported or target.startswith(f"{imported}.")
    )
    assert offending == []


def test_recovery_does_not_reach_the_loop_through_another_module() -> None:
    graph = _import_graph()
    seen: set[str] = set()
    todo = ["helix_dbos.runtime.recovery"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    assert "helix_dbos.runtime.loop" not in seen


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


STORE_REACH_THROUGHS_ALLOWED: dict[tuple[str, str], str] = {}
"""``<object>.store`` uses in ``service/`` and ``cli/``, each with its reason (none today).

The service and the CLI read through the executor's read API (``executor.reads``,
``runtime/reads.py``) and act through its public methods; the store is the runtime's. A CLI
command that opens a store of its own from a database URL (no executor) names it as a plain
variable, which this check does not see.
"""


def _store_reach_throughs(path: Path) -> list[str]:
    """The source of every ``X.store`` / ``X._store`` attribute in ``path``."""
    return [
        ast.unparse(node)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in {"store", "_store"}
    ]


def test_the_service_and_the_cli_never_reach_into_an_executors_store() -> None:
    found = {
        (path.relative_to(PACKAGE).as_posix(), use)
        for face in ("service", "cli")
        for path in sorted((PACKAGE / face).rglob("*.py"))
        for use in _store_reach_throughs(path)
    }
    assert sorted(found - STORE_REACH_THROUGHS_ALLOWED.keys()) == []


def test_the_store_reach_through_check_sees_one(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text("def f(ops):\n    return ops.executor.store.load_session('s')\n", encoding="utf-8")
    assert _store_reach_throughs(module) == ["ops.executor.store"]
