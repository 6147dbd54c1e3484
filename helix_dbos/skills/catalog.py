"""The Level-1 catalog fragment of the system prompt, and reading loaded skills back from history.

The fragment sits in the system prompt, the prefix prompt caches key on, so it must be the same
bytes on every step of a run and in every process: skills are sorted by name (by code point, not
locale), nothing depends on dict or set order, hash seeds, the clock or the file system's listing
order, and it never carries per-run state such as which skills were loaded (the seeds' cache-safety
contract: "already loaded" lives in the ``load_skill`` result, never in the catalog). Preloaded
skills are marked ``loaded="true"``, a static fact of the agent's configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from helix_dbos.messages import COMMON_METADATA_KEYS, AssistantMessage, Message, ToolResultMessage
from helix_dbos.skills.model import Skill, SkillMetadata
from helix_dbos.skills.provider import SkillProvider
from helix_dbos.tool import LOAD_SKILL_TOOL_NAME, READ_SKILL_FILE_TOOL_NAME

_log = logging.getLogger("helix_dbos.skills")

SKILLS_SECTION_HEADING = "## Skills"
ACTIVE_SKILLS_HEADING = "### Active Skills"
SKILLS_GUIDANCE = (
    "Skills are packaged instructions for specialised tasks. A Skill is NOT a tool: never call a "
    f"skill's name as a tool. To use a skill, call the `{LOAD_SKILL_TOOL_NAME}` tool with its name; it "
    "returns the skill's instructions. A skill may bundle files (references, scripts, assets): read "
    f"them with the `{READ_SKILL_FILE_TOOL_NAME}` tool. Load a skill only when the task needs it."
)


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def generate_skills_system_prompt_fragment(metadata: Iterable[SkillMetadata], preloaded: Sequence[Skill] = ()) -> str:
    """The ``## Skills`` section for these skills (``''`` for none): pure and byte-stable.

    ``preloaded`` skills are marked ``loaded="true"`` in the catalog and their bodies rendered
    under ``### Active Skills``, both sorted by name.
    """
    skills = sorted({m.name: m for m in metadata}.values(), key=lambda m: m.name)
    if not skills:
        return ""
    bodies = sorted({s.name: s for s in preloaded}.values(), key=lambda s: s.name)
    loaded = {s.name for s in bodies}
    entries = []
    for skill in skills:
        marker = ' loaded="true"' if skill.name in loaded else ""
        entries.append(f'<skill name="{_attr(skill.name)}"{marker}>\n{skill.description.strip()}\n</skill>')
    parts = [
        SKILLS_SECTION_HEADING,
        SKILLS_GUIDANCE,
        "<available_skills>\n" + "\n".join(entries) + "\n</available_skills>",
    ]
    if bodies:
        active = [f'<skill_content name="{_attr(s.name)}">\n{s.body.strip()}\n</skill_content>' for s in bodies]
        parts.append(
            ACTIVE_SKILLS_HEADING
            + "\nThese skills are already loaded; follow them without calling "
            + f"`{LOAD_SKILL_TOOL_NAME}`.\n\n"
            + "\n\n".join(active)
        )
    return "\n\n".join(parts)


async def resolve_skills_catalog(provider: SkillProvider | None, preload_skills: Sequence[str] = ()) -> str:
    """Resolve the fragment (catalog + preloaded bodies) from a provider. Never raises.

    A provider that fails is logged and yields ``''`` (the agent runs without skills rather than not
    at all); an unknown preload name is logged and skipped.
    """
    if provider is None:
        return ""
    try:
        metadata = await provider.list_skills()
    except Exception as exc:
        _log.warning("skill provider failed to list skills; running without the catalog: %s", exc, exc_info=exc)
        return ""
    known = {m.name for m in metadata}
    preloaded: list[Skill] = []
    for name in sorted(set(preload_skills)):
        skill = None
        if name in known:
            try:
                skill = await provider.get_skill(name)
            except Exception as exc:
                _log.warning("skill provider failed to load preloaded skill %r: %s", name, exc, exc_info=exc)
                continue
        if skill is None:
            _log.warning("preload_skills names %r, which the agent's skills do not have; skipped", name)
            continue
        preloaded.append(skill)
    return generate_skills_system_prompt_fragment(metadata, preloaded)


def collect_loaded_skill_names(messages: Iterable[Message]) -> set[str]:
    """The skills ``load_skill`` loaded successfully in this history (pure; recovery-safe).

    Pairs each successful ``load_skill`` result with its call's ``name`` argument, so a call that
    failed (an unknown skill) or has no result yet does not count.
    """
    requested: dict[str, str] = {}
    loaded: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or []:
                if call.name == LOAD_SKILL_TOOL_NAME and isinstance(call.arguments.get("name"), str):
                    requested[call.id] = call.arguments["name"]
        elif isinstance(message, ToolResultMessage) and message.tool_name == LOAD_SKILL_TOOL_NAME:
            failed = bool((message.metadata or {}).get(COMMON_METADATA_KEYS.IS_ERROR))
            if not failed and message.tool_call_id in requested:
                loaded.add(requested[message.tool_call_id])
    return loaded


__all__ = [
    "ACTIVE_SKILLS_HEADING",
    "SKILLS_GUIDANCE",
    "SKILLS_SECTION_HEADING",
    "collect_loaded_skill_names",
    "generate_skills_system_prompt_fragment",
    "resolve_skills_catalog",
]
