"""The loop drives features through the capability seam and imports none of them.

Before the seam, ``runtime/loop.py`` and ``runtime/tools.py`` imported every feature and called
each at a hard-coded point; each new feature added a floor to a 17-deep import chain. Now a feature
is a :class:`~helix_dbos.capability.RunCapability` listed in ``runtime/builtin_capabilities.py``
(or an agent's own), and the driver calls capabilities at named points.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import helix_dbos

RUNTIME = Path(helix_dbos.__file__).parent / "runtime"

FEATURE_MODULES = {
    "budget",
    "children",
    "companion_steps",
    "companions",
    "hitl",
    "hitl_capability",
    "memory",
    "remote_sub_agents",
    "skills",
    "sub_agents",
    "builtin_capabilities",
}
"""Runtime modules that implement one feature (or list them): the driver must not import them."""

MAX_RUNTIME_DEPTH = 8
"""The longest chain of imports between runtime modules: 17 before the seam, 12 right after it, 8
since shared data and helpers moved to leaves (``run_request``, ``step_outputs``, ``hitl_wake``,
``child_control``, ``orchestration.delegation``) and type-only imports went under ``TYPE_CHECKING``.
Two chains are that long, ``launch -> executor -> workflow -> loop -> tools -> steps -> hooks -> aio``
and ``launch -> executor -> builtin_capabilities -> sub_agents -> children -> starts -> hooks -> aio``:
every feature is at most 5 deep, ``builtin_capabilities`` 6. A new floor means a module imports
another for something a leaf could hold: move that, rather than raising the number."""


def _runtime_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("helix_dbos.runtime."):
                found.add(node.module.split(".")[2])
            elif node.module == "helix_dbos.runtime":
                found.update(alias.name for alias in node.names)
    return found


def test_the_loop_and_the_tool_phases_import_no_feature() -> None:
    for driver in ("loop.py", "tools.py"):
        imported = _runtime_imports(RUNTIME / driver) & FEATURE_MODULES
        assert not imported, f"runtime/{driver} imports feature modules {sorted(imported)}: use a capability point"


def test_every_built_in_feature_is_a_capability() -> None:
    from helix_dbos.capability import RunCapability
    from helix_dbos.runtime.builtin_capabilities import builtin_capabilities

    names = [c.name for c in builtin_capabilities()]
    assert names == [
        *("skills", "budget", "memory", "companions", "sub_agents", "remote_sub_agents", "hitl", "mcp"),
        "compaction",
        "double_text",
    ]
    assert all(isinstance(c, RunCapability) for c in builtin_capabilities())


def test_the_runtime_import_chain_stays_short() -> None:
    modules = {p.stem: p for p in RUNTIME.glob("*.py") if p.stem != "__init__"}
    graph = {name: _runtime_imports(path) & modules.keys() for name, path in modules.items()}

    @functools.cache
    def depth(name: str) -> int:
        return 1 + max((depth(d) for d in graph[name]), default=0)

    deepest = max(modules, key=depth)
    assert depth(deepest) <= MAX_RUNTIME_DEPTH, f"runtime/{deepest}.py is {depth(deepest)} imports deep"
