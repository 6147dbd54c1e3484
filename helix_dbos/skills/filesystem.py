"""Skills from folders: ``parse_skill_file`` and the filesystem provider.

The layout is Anthropic's Agent Skills format: ``<root>/<skill-name>/SKILL.md`` (YAML frontmatter,
then the markdown body) with optional ``references/``, ``scripts/`` and ``assets/`` beside it::

    skills/
      deploy-runbook/
        SKILL.md            (YAML frontmatter: name, description; then the markdown body)
        references/checklist.md
        scripts/rollback.sh

A bad skill folder (no frontmatter, an invalid name, a name that differs from its folder) is
skipped with a warning: one bad skill never breaks the others. Every call reads the disk afresh
(no cache to go stale); the runtime checkpoints what a run saw, so a recovered run is unaffected
by edits made since.

Reading a file resolves symlinks and refuses any target outside the skill's folder, on top of the
lexical guard every provider gets (:mod:`helix_dbos.skills.paths`): the seeds' guard is lexical
only, and a symlink planted in a skill folder could otherwise expose any file the process can read.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from helix_dbos.errors import SkillPathError
from helix_dbos.skills.model import ReadResourceRange, Skill, SkillMetadata, SkillResourceRef, skill_name_problem
from helix_dbos.skills.paths import normalize_resource_path, resource_path_problem, slice_lines

SKILL_FILE = "SKILL.md"
MAX_RESOURCE_BYTES = 2 * 1024 * 1024
"""Larger files are refused: a resource is read whole before a line range is cut from it."""
MAX_LISTED_RESOURCES = 500
_FRONTMATTER_KEYS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})
_log = logging.getLogger("helix_dbos.skills")


@dataclass(frozen=True)
class ParseResult:
    """What :func:`parse_skill_file` found: ``ok`` with metadata and body, or an ``error``."""

    ok: bool
    metadata: SkillMetadata | None = None
    body: str = ""
    error: str | None = None


def parse_skill_file(raw: str) -> ParseResult:
    """Parse and validate a ``SKILL.md`` (YAML frontmatter + markdown body). Pure; never raises.

    Frontmatter keys outside the standard's (``name``, ``description``, ``license``,
    ``compatibility``, ``metadata``, ``allowed-tools``) are ignored, so skills written for other
    tools still load; ``metadata`` values are carried as strings.
    """
    text = raw.lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        return ParseResult(ok=False, error="SKILL.md must start with a '---' YAML frontmatter block")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r\n") == "---"), None)
    if end is None:
        return ParseResult(ok=False, error="the YAML frontmatter is not closed by a '---' line")
    try:
        data = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        return ParseResult(ok=False, error=f"the frontmatter is not valid YAML: {exc}")
    if not isinstance(data, dict):
        return ParseResult(ok=False, error="the frontmatter must be a YAML mapping")
    fields: dict[str, Any] = {k: v for k, v in data.items() if k in _FRONTMATTER_KEYS}
    if isinstance(fields.get("metadata"), dict):
        fields["metadata"] = {str(k): str(v) for k, v in fields["metadata"].items()}
    try:
        metadata = SkillMetadata.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {str(e['msg']).removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        return ParseResult(ok=False, error=f"invalid frontmatter: {problems}")
    body = "".join(lines[end + 1 :]).strip("\n")
    if not body.strip():
        return ParseResult(ok=False, error="the skill body (after the frontmatter) is empty")
    return ParseResult(ok=True, metadata=metadata, body=body)


class FileSystemSkillProvider:
    """Skills from ``<root>/<name>/SKILL.md`` folders (the seeds' ``fileSystemSkillProvider``).

    With several roots, the first one holding a skill name wins. File I/O runs in a worker thread
    so a slow disk does not stall the event loop the runtime shares with model calls.
    """

    def __init__(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        if isinstance(roots, (str, os.PathLike)):
            roots = [roots]
        self.roots: tuple[Path, ...] = tuple(Path(r) for r in roots)

    async def list_skills(self) -> list[SkillMetadata]:
        """Every valid skill's metadata."""
        return await asyncio.to_thread(self._list)

    async def get_skill(self, name: str) -> Skill | None:
        """The skill's body and its resource files, or ``None``."""
        return await asyncio.to_thread(self._get, name)

    async def read_resource(self, name: str, path: str, range: ReadResourceRange | None = None) -> str | None:
        """A file of the skill; ``None`` when unknown. Raises ``SkillPathError`` when refused."""
        return await asyncio.to_thread(self._read, name, path, range or ReadResourceRange())

    # --- sync bodies --------------------------------------------------------------------------

    def _scan(self) -> dict[str, tuple[Path, SkillMetadata, str]]:
        found: dict[str, tuple[Path, SkillMetadata, str]] = {}
        for root in self.roots:
            if not root.is_dir():
                _log.warning("skills root %s is not a directory; skipped", root)
                continue
            for folder in sorted(root.iterdir()):
                parsed = self._load_folder(folder)
                if parsed is None:
                    continue
                metadata, body = parsed
                if metadata.name in found:
                    _log.warning("skill %r in %s is shadowed by %s", metadata.name, folder, found[metadata.name][0])
                    continue
                found[metadata.name] = (folder, metadata, body)
        return found

    def _load_folder(self, folder: Path) -> tuple[SkillMetadata, str] | None:
        skill_file = folder / SKILL_FILE
        if folder.name.startswith(".") or not skill_file.is_file():
            return None
        parsed = parse_skill_file(skill_file.read_text(encoding="utf-8", errors="replace"))
        if not parsed.ok or parsed.metadata is None:
            _log.warning("skill folder %s skipped: %s", folder, parsed.error)
            return None
        if parsed.metadata.name != folder.name:
            _log.warning("skill folder %s skipped: its name %r differs from the folder's", folder, parsed.metadata.name)
            return None
        return parsed.metadata, parsed.body

    def _list(self) -> list[SkillMetadata]:
        return [metadata for _, metadata, _ in self._scan().values()]

    def _folder_of(self, name: str) -> tuple[Path, SkillMetadata, str] | None:
        if skill_name_problem(name) is not None:
            return None  # never build a path from a name that is not a valid skill name
        for root in self.roots:
            folder = root / name
            parsed = self._load_folder(folder) if folder.is_dir() else None
            if parsed is not None:
                return folder, parsed[0], parsed[1]
        return None

    def _get(self, name: str) -> Skill | None:
        entry = self._folder_of(name)
        if entry is None:
            return None
        folder, metadata, body = entry
        refs = tuple(SkillResourceRef(path=p) for p in _resource_paths(folder))
        return Skill.model_validate({**metadata.model_dump(by_alias=True), "body": body, "resources": refs})

    def _read(self, name: str, path: str, rng: ReadResourceRange) -> str | None:
        problem = resource_path_problem(path)
        if problem is not None:
            raise SkillPathError(path, problem)
        entry = self._folder_of(name)
        if entry is None:
            return None
        folder = entry[0].resolve()
        target = folder / normalize_resource_path(path)
        if not target.exists() and not target.is_symlink():
            return None
        real = target.resolve()
        if not real.is_relative_to(folder):
            raise SkillPathError(path, "it resolves (through a symlink) to a file outside the skill's folder")
        if not real.is_file():
            return None
        if real.stat().st_size > MAX_RESOURCE_BYTES:
            raise SkillPathError(path, f"the file is larger than {MAX_RESOURCE_BYTES} bytes")
        text = real.read_bytes().decode("utf-8", errors="replace")
        return slice_lines(text, rng.start_line, rng.end_line)


def _resource_paths(folder: Path) -> list[str]:
    """The skill's files (not ``SKILL.md``, not hidden, not escaping symlinks), sorted."""
    base = folder.resolve()
    paths: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            relative = full.relative_to(folder).as_posix()
            if filename.startswith(".") or relative == SKILL_FILE:
                continue
            if not full.resolve().is_relative_to(base):
                continue
            paths.append(relative)
            if len(paths) >= MAX_LISTED_RESOURCES:
                return sorted(paths)
    return sorted(paths)


def file_system_skill_provider(roots: Sequence[str | os.PathLike[str]]) -> FileSystemSkillProvider:
    """A :class:`SkillProvider` over skill folders under ``roots``."""
    return FileSystemSkillProvider(roots)


__all__ = [
    "MAX_RESOURCE_BYTES",
    "SKILL_FILE",
    "FileSystemSkillProvider",
    "ParseResult",
    "file_system_skill_provider",
    "parse_skill_file",
]
