"""The auto-injected ``load_skill`` and ``read_skill_file`` tools (Levels 2 and 3).

``build_effective_tools`` adds both to an agent that has ``skills``. They run like any tool, each
call a checkpointed step, so the provider's I/O happens inside the step and a recovered run replays
the recorded result. Their names, argument names (``name``, ``path``, ``startLine``, ``endLine``)
and descriptions are what the model reads, so they keep the seeds' spelling and never vary per run
(the tool list is part of the cached prompt prefix too).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.errors import SkillNotFoundError, SkillPathError
from helix_dbos.skills.model import ReadResourceRange, Skill
from helix_dbos.skills.paths import resource_path_problem
from helix_dbos.skills.provider import SkillProvider
from helix_dbos.tool import LOAD_SKILL_TOOL_NAME, READ_SKILL_FILE_TOOL_NAME, Tool, ToolContext

SKILL_LOADED_EVENT = "skill_loaded"
"""The custom stream event ``load_skill`` emits, with ``{"name": ...}`` (informational)."""


class LoadSkillInput(BaseModel):
    """Arguments of ``load_skill``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The skill's name, exactly as listed in the Skills catalog.")


class ReadSkillFileInput(BaseModel):
    """Arguments of ``read_skill_file``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(description="The skill's name, exactly as listed in the Skills catalog.")
    path: str = Field(description="The file's path relative to the skill's folder, e.g. references/forms.md.")
    start_line: int | None = Field(
        default=None, alias="startLine", ge=1, description="First line to return (1-indexed, inclusive)."
    )
    end_line: int | None = Field(
        default=None, alias="endLine", ge=1, description="Last line to return (1-indexed, inclusive)."
    )


def render_loaded_skill(skill: Skill) -> str:
    """What ``load_skill`` returns: the body, then the skill's files (if any) and how to read them."""
    text = f"# Skill: {skill.name}\n\n{skill.body.strip()}"
    if skill.resources:
        listing = "\n".join(f"- {ref.path}" for ref in skill.resources)
        text += (
            f"\n\n## Files bundled with this skill\nRead one with `{READ_SKILL_FILE_TOOL_NAME}` "
            f'(name="{skill.name}", path=...):\n{listing}'
        )
    return text


async def _available(provider: SkillProvider) -> list[str]:
    try:
        return sorted(m.name for m in await provider.list_skills())
    except Exception:  # the listing only improves the error message
        return []


def create_load_skill_tool(provider: SkillProvider) -> Tool:
    """``load_skill {name}``: the skill's body as the tool result, and a ``skill_loaded`` event."""

    async def load_skill(inp: LoadSkillInput, ctx: ToolContext) -> str:
        skill = await provider.get_skill(inp.name)
        if skill is None:
            raise SkillNotFoundError(inp.name, await _available(provider))
        ctx.emit(SKILL_LOADED_EVENT, {"name": skill.name})
        return render_loaded_skill(skill)

    return Tool(
        name=LOAD_SKILL_TOOL_NAME,
        description=(
            "Load a skill from the Skills catalog in your instructions: returns the skill's full "
            "instructions (and the list of files bundled with it). Call it before doing a task a "
            "skill covers. Skills are not tools: load them with this tool."
        ),
        input_schema=LoadSkillInput,
        execute=load_skill,
    )


def create_read_skill_file_tool(provider: SkillProvider) -> Tool:
    """``read_skill_file {name, path, startLine?, endLine?}``: a bundled file's text."""

    async def read_skill_file(inp: ReadSkillFileInput, ctx: ToolContext) -> str:
        problem = resource_path_problem(inp.path)
        if problem is not None:  # refused before any provider sees the path
            raise SkillPathError(inp.path, problem)
        if inp.start_line is not None and inp.end_line is not None and inp.end_line < inp.start_line:
            raise ValueError(f"endLine {inp.end_line} is before startLine {inp.start_line}")
        skill = await provider.get_skill(inp.name)
        if skill is None:
            raise SkillNotFoundError(inp.name, await _available(provider))
        text = await provider.read_resource(
            inp.name, inp.path, ReadResourceRange(start_line=inp.start_line, end_line=inp.end_line)
        )
        if text is None:
            files = ", ".join(ref.path for ref in skill.resources) or "none"
            raise FileNotFoundError(f"skill {inp.name!r} has no file {inp.path!r} (its files: {files})")
        return text

    schema: dict[str, Any] = ReadSkillFileInput.model_json_schema(by_alias=True)
    schema.pop("title", None)
    schema.pop("description", None)
    return Tool(
        name=READ_SKILL_FILE_TOOL_NAME,
        description=(
            "Read a file bundled with a skill (a reference, script or asset listed when you loaded "
            "the skill). Give the skill's name and the file's path relative to the skill's folder; "
            "startLine/endLine (1-indexed, inclusive) return part of a long file. Scripts are "
            "returned as text, not run."
        ),
        input_schema=ReadSkillFileInput,
        parameters_schema=schema,
        execute=read_skill_file,
    )


def create_skill_tools(provider: SkillProvider | None) -> list[Tool]:
    """``[load_skill, read_skill_file]`` for an agent with skills; ``[]`` without."""
    if provider is None:
        return []
    return [create_load_skill_tool(provider), create_read_skill_file_tool(provider)]


__all__ = [
    "SKILL_LOADED_EVENT",
    "LoadSkillInput",
    "ReadSkillFileInput",
    "create_load_skill_tool",
    "create_read_skill_file_tool",
    "create_skill_tools",
    "render_loaded_skill",
]
