"""``SkillProvider``: where skills come from, and the in-code provider over plain data.

The protocol is the seeds' three-level interface, async because a provider may do I/O (files, a
network). The runtime only calls it where I/O is allowed: the catalog in a checkpointed step at the
start of each run, ``load_skill`` / ``read_skill_file`` inside their tool steps. So a recovered run
replays what the provider said before the crash, whatever it would say now.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from helix_dbos.errors import DefinitionError
from helix_dbos.skills.model import ReadResourceRange, Skill, SkillDefinition, SkillMetadata, SkillResourceRef
from helix_dbos.skills.paths import normalize_resource_path, resource_path_problem, slice_lines


@runtime_checkable
class SkillProvider(Protocol):
    """Skills behind a small async interface (the seeds' ``SkillProvider``)."""

    async def list_skills(self) -> list[SkillMetadata]:
        """Level 1: every skill's metadata (the framework sorts it by name)."""
        ...

    async def get_skill(self, name: str) -> Skill | None:
        """Level 2: a skill's body and resource list, or ``None`` when there is no such skill."""
        ...

    async def read_resource(self, name: str, path: str, range: ReadResourceRange | None = None) -> str | None:
        """Level 3: a resource's text (``range`` applied), or ``None`` when unknown or refused."""
        ...


class InCodeSkillProvider:
    """A provider over in-memory :class:`SkillDefinition` s: deterministic data, no I/O.

    Built by :func:`in_code_skill_provider`; ``define_agent(skills=[...])`` builds one for you.
    """

    def __init__(self, skills: Iterable[SkillDefinition]) -> None:
        self._skills: dict[str, SkillDefinition] = {}
        for skill in skills:
            if not isinstance(skill, SkillDefinition):
                raise DefinitionError(f"skills must be made with define_skill, got {skill!r}")
            if skill.name in self._skills:
                raise DefinitionError(f"duplicate skill name {skill.name!r}")
            self._skills[skill.name] = skill

    @property
    def definitions(self) -> tuple[SkillDefinition, ...]:
        """The definitions, in the order given."""
        return tuple(self._skills.values())

    async def list_skills(self) -> list[SkillMetadata]:
        """Every skill's metadata."""
        return [skill.metadata_only() for skill in self._skills.values()]

    async def get_skill(self, name: str) -> Skill | None:
        """The skill's body and its resource paths (sorted, so the result is stable)."""
        skill = self._skills.get(name)
        if skill is None:
            return None
        data = skill.metadata_only().model_dump(by_alias=True)
        refs = tuple(SkillResourceRef(path=normalize_resource_path(p)) for p in sorted(skill.resources))
        return Skill.model_validate({**data, "body": skill.body, "resources": refs})

    async def read_resource(self, name: str, path: str, range: ReadResourceRange | None = None) -> str | None:
        """The resource's text (a loader is called, and awaited when async)."""
        skill = self._skills.get(name)
        if skill is None or resource_path_problem(path) is not None:
            return None
        wanted = normalize_resource_path(path)
        content = next((c for p, c in skill.resources.items() if normalize_resource_path(p) == wanted), None)
        if content is None:
            return None
        if callable(content):
            loaded = content()
            text = await loaded if inspect.isawaitable(loaded) else loaded
        else:
            text = content
        rng = range or ReadResourceRange()
        return slice_lines(str(text), rng.start_line, rng.end_line)


def in_code_skill_provider(skills: Sequence[SkillDefinition]) -> InCodeSkillProvider:
    """A :class:`SkillProvider` over in-code definitions; a duplicate name raises ``DefinitionError``."""
    return InCodeSkillProvider(skills)


SkillsConfig = SkillProvider | Sequence[SkillDefinition]
"""What ``define_agent(skills=...)`` accepts: a provider, or definitions (sugar for the in-code provider)."""


def to_skill_provider(skills: SkillsConfig | None) -> SkillProvider | None:
    """The provider for an agent's ``skills`` setting; ``None`` (skills off) for ``None`` or ``[]``.

    An empty list is the seeds' "empty skill set": a total no-op, no catalog and no skill tools.
    """
    if skills is None:
        return None
    if isinstance(skills, SkillProvider):
        return skills
    if isinstance(skills, (str, bytes)) or not isinstance(skills, Sequence):
        raise DefinitionError(f"skills must be a SkillProvider or a list of define_skill(...) results, got {skills!r}")
    return in_code_skill_provider(list(skills)) if len(skills) else None


__all__ = ["InCodeSkillProvider", "SkillProvider", "SkillsConfig", "in_code_skill_provider", "to_skill_provider"]
