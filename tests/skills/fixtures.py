"""Skill folders and definitions shared by the skills tests (and their worker processes)."""

from __future__ import annotations

from pathlib import Path

from helix_dbos import define_skill

DEPLOY_SKILL_MD = """---
name: deploy-runbook
description: Deploy the service safely. Use when asked to deploy or roll back.
license: MIT
metadata:
  owner: platform
  version: 2
allowed-tools: shell read_file
---
# Deploy runbook

1. Read references/checklist.md.
2. Run scripts/deploy.sh.
"""

CHECKLIST = "".join(f"check {i}\n" for i in range(1, 11))


def write_skill_folder(root: Path, name: str, description: str, body: str, files: dict[str, str] | None = None) -> Path:
    """``root/name/SKILL.md`` plus ``files`` (skill-relative paths)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    for path, text in (files or {}).items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return folder


def make_skills_root(root: Path) -> Path:
    """A skills root with ``deploy-runbook`` (references/, scripts/, assets/) and ``pdf-processing``."""
    root.mkdir(parents=True, exist_ok=True)
    folder = root / "deploy-runbook"
    (folder / "references").mkdir(parents=True)
    (folder / "scripts").mkdir()
    (folder / "assets").mkdir()
    (folder / "SKILL.md").write_text(DEPLOY_SKILL_MD)
    (folder / "references" / "checklist.md").write_text(CHECKLIST)
    (folder / "scripts" / "deploy.sh").write_text("#!/bin/sh\necho deploying\n")
    (folder / "assets" / "logo.txt").write_text("LOGO\n")
    write_skill_folder(
        root, "pdf-processing", "Extract text from PDFs. Use when working with PDF files.", "# PDF\nUse pdftotext."
    )
    return root


IN_CODE_SKILLS = [
    define_skill(
        "pdf-processing",
        description="Extract text and tables from PDFs. Use when working with PDF files.",
        body="# PDF processing\nUse pdftotext, then check the tables.",
        resources={"references/forms.md": "line 1\nline 2\nline 3\n", "scripts/x.py": lambda: "print('x')\n"},
    ),
    define_skill(
        "deploy-runbook",
        description="Deploy the service safely. Use when asked to deploy.",
        body="# Deploy\nFollow the checklist.",
    ),
]
