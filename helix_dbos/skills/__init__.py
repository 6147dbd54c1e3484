"""Skills: progressive disclosure of packaged instructions (seed 001 "Skills", seed 002 API).

- Level 1, the catalog: every skill's name and description, appended to the system prompt
  (:mod:`.catalog`), resolved once per run in a checkpointed step;
- Level 2, the body: returned by the auto-injected ``load_skill`` tool (:mod:`.tools`);
- Level 3, files: read by the auto-injected ``read_skill_file`` tool, behind a path guard.

Skills come from a :class:`SkillProvider` (:mod:`.provider`): in-code definitions
(:func:`define_skill`, :mod:`.model`) or skill folders on disk (:mod:`.filesystem`).
"""

from helix_dbos.skills.catalog import (
    collect_loaded_skill_names,
    generate_skills_system_prompt_fragment,
    resolve_skills_catalog,
)
from helix_dbos.skills.filesystem import (
    FileSystemSkillProvider,
    ParseResult,
    file_system_skill_provider,
    parse_skill_file,
)
from helix_dbos.skills.model import (
    ReadResourceRange,
    Skill,
    SkillDefinition,
    SkillMetadata,
    SkillResourceRef,
    define_skill,
)
from helix_dbos.skills.provider import InCodeSkillProvider, SkillProvider, SkillsConfig, in_code_skill_provider
from helix_dbos.skills.tools import SKILL_LOADED_EVENT, create_skill_tools

__all__ = [
    "SKILL_LOADED_EVENT",
    "FileSystemSkillProvider",
    "InCodeSkillProvider",
    "ParseResult",
    "ReadResourceRange",
    "Skill",
    "SkillDefinition",
    "SkillMetadata",
    "SkillProvider",
    "SkillResourceRef",
    "SkillsConfig",
    "collect_loaded_skill_names",
    "create_skill_tools",
    "define_skill",
    "file_system_skill_provider",
    "generate_skills_system_prompt_fragment",
    "in_code_skill_provider",
    "parse_skill_file",
    "resolve_skills_catalog",
]
