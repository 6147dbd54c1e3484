"""Skill data: ``SkillMetadata`` (Level 1), ``Skill`` (Level 2), ``SkillDefinition`` and ``define_skill``.

A skill is plain data (seed 001 "Skills"): a name and a description that sit in the system-prompt
catalog, a markdown body the model loads on demand, and optional resource files it reads on demand.
Names follow the open Agent Skills standard: lowercase ``a-z``/``0-9`` with single hyphens, at most
64 characters. No underscores, so a skill name can never be mistaken for a tool name such as
``load_skill``; and not ``anthropic``/``claude``, which the standard reserves.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from helix_dbos.errors import DefinitionError
from helix_dbos.skills.paths import resource_path_problem

SKILL_NAME_MAX_LENGTH = 64
SKILL_DESCRIPTION_MAX_LENGTH = 1024
SKILL_COMPATIBILITY_MAX_LENGTH = 500
_SKILL_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # fullmatch: `$` would accept "x\n"
_RESERVED_WORDS = ("anthropic", "claude")


def skill_name_problem(name: object) -> str | None:
    """Why ``name`` is not a valid skill name, or ``None`` when it is."""
    if not isinstance(name, str) or not name:
        return "a skill name must be a non-empty string"
    if len(name) > SKILL_NAME_MAX_LENGTH:
        return f"a skill name has at most {SKILL_NAME_MAX_LENGTH} characters"
    if not _SKILL_NAME.fullmatch(name):
        return "use lowercase letters, digits and single hyphens ([a-z0-9-], no underscores, no leading/trailing '-')"
    if any(word in name for word in _RESERVED_WORDS):
        return "a skill name may not contain 'anthropic' or 'claude' (reserved by the Agent Skills standard)"
    return None


class SkillMetadata(BaseModel):
    """Level 1: what the always-resident catalog shows of a skill (the seeds' ``skillMetadataSchema``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str
    """Lowercase ``a-z``/``0-9`` with single hyphens, at most 64 characters."""
    description: str
    """What the skill does and when to use it ("... Use when ..."); at most 1024 characters."""
    license: str | None = None
    compatibility: str | None = Field(default=None, max_length=SKILL_COMPATIBILITY_MAX_LENGTH)
    """Environment requirements, at most 500 characters."""
    metadata: dict[str, str] | None = None
    """Free-form string pairs from the frontmatter (carried, not interpreted)."""
    allowed_tools: tuple[str, ...] | None = Field(default=None, alias="allowed-tools")
    """The open standard's ``allowed-tools``: parsed and carried, not enforced."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        problem = skill_name_problem(value)
        if problem is not None:
            raise ValueError(f"invalid skill name {value!r}: {problem}")
        return value

    @field_validator("description")
    @classmethod
    def _check_description(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("a skill needs a non-empty description (the catalog shows it)")
        if len(value) > SKILL_DESCRIPTION_MAX_LENGTH:
            raise ValueError(f"a skill description has at most {SKILL_DESCRIPTION_MAX_LENGTH} characters")
        return value

    @field_validator("allowed_tools", mode="before")
    @classmethod
    def _split_allowed_tools(cls, value: Any) -> Any:
        # The standard writes it as a space-separated string; lists are accepted too.
        return tuple(value.split()) if isinstance(value, str) else value

    def metadata_only(self) -> SkillMetadata:
        """The Level-1 part (drops the body and resources of a subclass)."""
        return SkillMetadata.model_validate(self.model_dump(include=set(SkillMetadata.model_fields)))


class SkillResourceRef(BaseModel):
    """A file bundled with a skill, by its skill-relative path (``references/forms.md``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    description: str | None = None
    """Reserved for future use (the seeds' field)."""


class Skill(SkillMetadata):
    """Level 2: a skill's body and the list of its resource files (what ``load_skill`` returns)."""

    body: str
    resources: tuple[SkillResourceRef, ...] = ()


ResourceContent = str | Callable[[], str | Awaitable[str]]
"""An in-code resource: its text, or a (sync or async) function returning it when it is read."""


class SkillDefinition(SkillMetadata):
    """An in-code skill (the "plain data" delivery mode). Build it with :func:`define_skill`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, arbitrary_types_allowed=True)

    body: str
    """The markdown instructions ``load_skill`` returns."""
    resources: Mapping[str, ResourceContent] = Field(default_factory=dict)
    """Skill-relative path -> content, or a loader called when ``read_skill_file`` reads it."""

    @field_validator("body")
    @classmethod
    def _check_body(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a skill needs a non-empty body")
        return value


class ReadResourceRange(BaseModel):
    """A 1-indexed, inclusive line range for ``read_skill_file``; either end may be omitted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)


def define_skill(
    name: str,
    *,
    description: str,
    body: str,
    resources: Mapping[str, ResourceContent] | None = None,
    license: str | None = None,
    compatibility: str | None = None,
    metadata: Mapping[str, str] | None = None,
    allowed_tools: list[str] | tuple[str, ...] | str | None = None,
) -> SkillDefinition:
    """Define an in-code skill, validated now so a bad name fails at import time, not mid-run.

    Resource paths are checked like ``read_skill_file`` arguments (relative, no ``..``), so a
    definition can never name a file the tool would refuse to read.
    """
    try:
        definition = SkillDefinition(
            name=name,
            description=description,
            body=body,
            resources=dict(resources or {}),
            license=license,
            compatibility=compatibility,
            metadata=dict(metadata) if metadata is not None else None,
            allowed_tools=allowed_tools,  # a string is split by the validator
        )
    except ValidationError as exc:
        raise DefinitionError(f"skill {name!r}: {_first_problem(exc)}") from exc
    for path in definition.resources:
        problem = resource_path_problem(path)
        if problem is not None:
            raise DefinitionError(f"skill {name!r}: resource {path!r}: {problem}")
    return definition


def _first_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


__all__ = [
    "SKILL_DESCRIPTION_MAX_LENGTH",
    "SKILL_NAME_MAX_LENGTH",
    "ReadResourceRange",
    "ResourceContent",
    "Skill",
    "SkillDefinition",
    "SkillMetadata",
    "SkillResourceRef",
    "define_skill",
    "skill_name_problem",
]
