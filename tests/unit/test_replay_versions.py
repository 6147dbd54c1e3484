"""The replay versions are all listed (``helix_dbos/runtime/replay_versions.py``) and the list is true."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import get_type_hints

import helix_dbos
from helix_dbos.runtime import step_outputs
from helix_dbos.runtime.builtin_capabilities import builtin_capabilities
from helix_dbos.runtime.replay_versions import LEGACY_OUTPUT_KEYS, PATCHES
from helix_dbos.runtime.run_context import RunRequest

PACKAGE = Path(helix_dbos.__file__).parent


def _patch_calls() -> list[tuple[str, str]]:
    """``(file, argument source)`` of every ``DBOS.patch(...)`` / ``DBOS.patch_async(...)`` call."""
    found: list[tuple[str, str]] = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("patch", "patch_async", "deprecate_patch")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "DBOS"
            ):
                found.append((str(path.relative_to(PACKAGE)), ast.unparse(node.args[0])))
    return found


def test_every_dbos_patch_asked_is_a_listed_named_constant() -> None:
    listed = {p.name for p in PATCHES}
    calls = _patch_calls()
    assert calls, "no DBOS.patch call found: the scan is broken"
    for where, argument in calls:
        assert re.fullmatch(r"[A-Z_]+", argument), f"{where}: DBOS.patch({argument}) must take a named constant"
        module = importlib.import_module("helix_dbos." + where.removesuffix(".py").replace("/", "."))
        assert getattr(module, argument, None) in listed, f"{where}: {argument} is not in replay_versions.PATCHES"
    assert len(listed) == len(PATCHES), "a patch name is listed twice"


def test_each_legacy_key_is_still_a_key_of_its_output() -> None:
    for legacy in LEGACY_OUTPUT_KEYS:
        owner = RunRequest if legacy.output == "RunRequest" else getattr(step_outputs, legacy.output)
        keys = owner.model_fields if legacy.output == "RunRequest" else get_type_hints(owner)
        assert legacy.key in keys, f"{legacy.output}.{legacy.key} is listed as legacy but no longer exists"
        module = PACKAGE / legacy.read_in.split(":", 1)[0]
        assert legacy.key in module.read_text(encoding="utf-8"), f"{legacy.read_in} no longer reads {legacy.key}"


def test_capabilities_declare_only_listed_patches() -> None:
    listed = {p.name for p in PATCHES}
    for capability in builtin_capabilities():
        assert set(capability.replay_patches) <= listed, capability.name


def test_the_guardrail_call_kinds_patch_is_asked_only_by_guardrails() -> None:
    """Only an agent given guardrails asks it: every other run records no row for it."""
    from helix_dbos.guardrails.capability import ALL_CALLS_PATCH, Guardrails

    assert ALL_CALLS_PATCH in {p.name for p in PATCHES}
    assert ALL_CALLS_PATCH in Guardrails.replay_patches
    assert set(Guardrails.replay_patches) <= {p.name for p in PATCHES}
    askers = {where for where, argument in _patch_calls() if argument == "ALL_CALLS_PATCH"}
    assert askers == {"guardrails/capability.py"}
    assert all(ALL_CALLS_PATCH not in c.replay_patches for c in builtin_capabilities())


def test_the_sub_agent_parking_patch_is_asked_once_per_run_and_only_where_children_are_awaited() -> None:
    """Runs without sub-agents never ask it (no marker row); the sub-agents capability declares it."""
    from helix_dbos.runtime.child_park import CHILD_PARK_PATCH
    from helix_dbos.runtime.sub_agents import SubAgentsCapability

    assert CHILD_PARK_PATCH in {p.name for p in PATCHES}
    assert CHILD_PARK_PATCH in SubAgentsCapability.replay_patches
    askers = {where for where, argument in _patch_calls() if argument == "CHILD_PARK_PATCH"}
    assert askers == {"runtime/child_park.py"}
