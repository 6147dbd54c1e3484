"""Skills, the parts without a database: definitions, providers, the catalog, the tools and the path guard."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import DefinitionError, define_agent, define_skill, define_tool, in_code_skill_provider
from helix_dbos.errors import SkillNotFoundError, SkillPathError
from helix_dbos.messages import AssistantMessage, SystemMessage, ToolCallRequest, UserMessage
from helix_dbos.orchestration.message_builder import create_tool_result_message
from helix_dbos.orchestration.state_operations import build_agent_messages_for_llm, build_effective_tools
from helix_dbos.skills import (
    SkillProvider,
    collect_loaded_skill_names,
    file_system_skill_provider,
    generate_skills_system_prompt_fragment,
    parse_skill_file,
    resolve_skills_catalog,
)
from helix_dbos.skills.model import SkillMetadata
from helix_dbos.skills.paths import resource_path_problem, slice_lines
from helix_dbos.state.tracker import StateTracker
from helix_dbos.sub_agent import create_sub_agent_tool
from helix_dbos.tool import (
    LOAD_SKILL_TOOL_NAME,
    READ_SKILL_FILE_TOOL_NAME,
    RESERVED_TOOL_NAMES,
    Tool,
    create_tool_context,
)
from tests.skills.fixtures import CHECKLIST, DEPLOY_SKILL_MD, IN_CODE_SKILLS, make_skills_root

REPO = Path(__file__).resolve().parents[2]


def agent(name: str = "helper", **kwargs: Any) -> Any:
    return define_agent(name, system_prompt="You help.", llm_config="openai/fake", **kwargs)


def ctx(tool_name: str) -> Any:
    return create_tool_context(
        agent_id="r1",
        agent_type="helper",
        session_id="s1",
        tool_call_id="c1",
        tool_name=tool_name,
        state_tracker=StateTracker({}),
    )


async def call(tool: Tool, arguments: dict[str, Any]) -> tuple[Any, Any]:
    context = ctx(tool.name)
    return await tool.run(tool.validate_input(arguments), context), context


def tools_of(a: Any) -> dict[str, Tool]:
    return {t.name: t for t in build_effective_tools(a)}


# --- names and definitions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Deploy",
        "deploy_runbook",
        "-deploy",
        "deploy-",
        "de--ploy",
        "a" * 65,
        "claude-helper",
        "my-anthropic",
        "x\n",
    ],
)
def test_invalid_skill_names_are_refused(name: str) -> None:
    with pytest.raises(DefinitionError):
        define_skill(name, description="d", body="b")


def test_a_skill_name_can_never_be_a_reserved_tool_name() -> None:
    assert {LOAD_SKILL_TOOL_NAME, READ_SKILL_FILE_TOOL_NAME} <= RESERVED_TOOL_NAMES
    for reserved in RESERVED_TOOL_NAMES:
        with pytest.raises(DefinitionError):
            define_skill(reserved, description="d", body="b")
        with pytest.raises(DefinitionError, match="reserved"):
            define_tool(reserved, execute=lambda i, c: None)


def test_define_skill_checks_description_body_and_resource_paths() -> None:
    with pytest.raises(DefinitionError, match="description"):
        define_skill("a", description="  ", body="b")
    with pytest.raises(DefinitionError, match="description"):
        define_skill("a", description="x" * 1025, body="b")
    with pytest.raises(DefinitionError, match="body"):
        define_skill("a", description="d", body="\n")
    with pytest.raises(DefinitionError, match=r"\.\."):
        define_skill("a", description="d", body="b", resources={"../secret": "x"})
    skill = define_skill("a-1", description="d", body="b", allowed_tools="shell read")
    assert skill.allowed_tools == ("shell", "read")


def test_the_in_code_provider_refuses_duplicates() -> None:
    with pytest.raises(DefinitionError, match="duplicate skill name 'a'"):
        in_code_skill_provider([define_skill("a", description="d", body="b")] * 2)
    with pytest.raises(DefinitionError, match="duplicate skill name"):
        agent(skills=[define_skill("a", description="d", body="b")] * 2)


def test_define_agent_accepts_a_list_or_a_provider_and_checks_preload_names(tmp_path: Path) -> None:
    listed = agent(skills=IN_CODE_SKILLS, preload_skills=["deploy-runbook"])
    assert isinstance(listed.skills, SkillProvider)
    assert listed.preload_skills == ("deploy-runbook",)
    assert isinstance(agent(skills=file_system_skill_provider([tmp_path])).skills, SkillProvider)
    with pytest.raises(DefinitionError, match="preload_skills"):
        agent(skills=IN_CODE_SKILLS, preload_skills=["Bad_Name"])
    with pytest.raises(DefinitionError, match="not a string"):
        agent(skills=IN_CODE_SKILLS, preload_skills="deploy-runbook")
    with pytest.raises(DefinitionError, match="skills must be"):
        agent(skills="deploy-runbook")
    with pytest.raises(DefinitionError, match="define_skill"):
        agent(skills=[{"name": "a"}])


# --- tools and prompt -------------------------------------------------------------------------------


def test_skill_tools_are_injected_only_with_skills() -> None:
    assert LOAD_SKILL_TOOL_NAME not in tools_of(agent())
    assert agent(skills=[]).skills is None  # an empty skill set is a total no-op
    names = [t.name for t in build_effective_tools(agent(skills=IN_CODE_SKILLS))]
    assert names == [LOAD_SKILL_TOOL_NAME, READ_SKILL_FILE_TOOL_NAME]
    schema = tools_of(agent(skills=IN_CODE_SKILLS))[READ_SKILL_FILE_TOOL_NAME].json_schema()
    assert set(schema["properties"]) == {"name", "path", "startLine", "endLine"}  # the seeds' spelling
    assert schema["required"] == ["name", "path"]


def test_sub_agents_and_companions_do_not_inherit_skills() -> None:
    class Out(BaseModel):
        answer: str

    class In(BaseModel):
        q: str

    child = agent("child", output_schema=Out)
    parent = agent(
        "parent", skills=IN_CODE_SKILLS, preload_skills=["deploy-runbook"], tools=[create_sub_agent_tool(child, In)]
    )
    assert LOAD_SKILL_TOOL_NAME in tools_of(parent)
    assert LOAD_SKILL_TOOL_NAME not in tools_of(child)
    assert child.skills is None and child.preload_skills == ()
    system = build_agent_messages_for_llm(child, [UserMessage(content="hi")], {})[0]
    assert isinstance(system, SystemMessage) and "## Skills" not in system.content


async def test_load_skill_returns_the_body_lists_files_and_emits_skill_loaded() -> None:
    load = tools_of(agent(skills=IN_CODE_SKILLS))[LOAD_SKILL_TOOL_NAME]
    result, context = await call(load, {"name": "pdf-processing"})
    assert result.startswith("# Skill: pdf-processing\n\n# PDF processing\nUse pdftotext")
    assert "- references/forms.md\n- scripts/x.py" in result
    assert [(e.event_name, e.data) for e in context.events] == [("skill_loaded", {"name": "pdf-processing"})]
    with pytest.raises(SkillNotFoundError, match="available skills: deploy-runbook, pdf-processing"):
        await call(load, {"name": "nope"})


async def test_read_skill_file_reads_ranges_and_lazy_resources() -> None:
    read = tools_of(agent(skills=IN_CODE_SKILLS))[READ_SKILL_FILE_TOOL_NAME]
    assert (await call(read, {"name": "pdf-processing", "path": "references/forms.md"}))[
        0
    ] == "line 1\nline 2\nline 3\n"
    ranged = {"name": "pdf-processing", "path": "./references/forms.md", "startLine": 2, "endLine": 2}
    assert (await call(read, ranged))[0] == "line 2\n"
    assert (await call(read, {"name": "pdf-processing", "path": "scripts/x.py"}))[0] == "print('x')\n"
    with pytest.raises(FileNotFoundError, match=r"its files: references/forms\.md, scripts/x\.py"):
        await call(read, {"name": "pdf-processing", "path": "references/none.md"})
    with pytest.raises(ValueError, match="before startLine"):
        await call(read, {**ranged, "startLine": 3, "endLine": 1})


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../deploy-runbook/SKILL.md", ".."),
        ("references/../../x", ".."),
        ("/etc/passwd", "absolute"),
        ("C:/windows/win.ini", "absolute"),
        ("references\\..\\x", "separator"),
        (".", "folder itself"),
        ("a\x00b", "NUL"),
    ],
)
def test_the_lexical_guard_refuses_traversal_and_absolute_paths(path: str, problem: str) -> None:
    found = resource_path_problem(path)
    assert found is not None and problem in found


def test_slice_lines_is_one_indexed_and_inclusive() -> None:
    text = "a\nb\nc\n"
    assert slice_lines(text, 2, 3) == "b\nc\n"
    assert slice_lines(text, None, 1) == "a\n"
    assert slice_lines(text, 3) == "c\n"
    assert slice_lines(text, 9) == ""


# --- the catalog -----------------------------------------------------------------------------------


def test_the_catalog_is_sorted_and_marks_preloaded_skills() -> None:
    b = SkillMetadata(name="b-skill", description="B. Use when b.")
    a = SkillMetadata(name="a-skill", description="A <x> & y. Use when a.")
    fragment = generate_skills_system_prompt_fragment([b, a])
    assert fragment == generate_skills_system_prompt_fragment([a, b])
    assert fragment.startswith("## Skills\n\n")
    assert "A Skill is NOT a tool" in fragment and "`load_skill`" in fragment
    assert fragment.index('<skill name="a-skill">') < fragment.index('<skill name="b-skill">')
    assert generate_skills_system_prompt_fragment([]) == ""


async def test_resolve_skills_catalog_preloads_bodies_and_skips_unknown_names(caplog: pytest.LogCaptureFixture) -> None:
    provider = in_code_skill_provider(IN_CODE_SKILLS)
    with caplog.at_level(logging.WARNING, logger="helix_dbos.skills"):
        fragment = await resolve_skills_catalog(provider, ["pdf-processing", "not-there"])
    assert "'not-there'" in caplog.text
    assert '<skill name="pdf-processing" loaded="true">' in fragment
    assert '<skill name="deploy-runbook">' in fragment
    assert fragment.split("### Active Skills", 1)[1].count("<skill_content") == 1
    assert "Use pdftotext, then check the tables." in fragment
    assert await resolve_skills_catalog(None) == ""


async def test_a_failing_provider_yields_no_catalog(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        async def list_skills(self) -> list[SkillMetadata]:
            raise OSError("disk gone")

        async def get_skill(self, name: str) -> None:
            return None

        async def read_resource(self, name: str, path: str, range: Any = None) -> None:
            return None

    assert isinstance(Broken(), SkillProvider)
    with caplog.at_level(logging.WARNING, logger="helix_dbos.skills"):
        assert await resolve_skills_catalog(Broken()) == ""
    assert "disk gone" in caplog.text


def test_the_fragment_is_appended_after_the_prompt() -> None:
    a = agent(skills=IN_CODE_SKILLS)
    system = build_agent_messages_for_llm(a, [UserMessage(content="hi")], {}, skills_fragment="## Skills\nX")[0]
    assert system.content == "You help.\n\n## Skills\nX"  # type: ignore[union-attr]


def test_collect_loaded_skill_names_counts_successful_loads_only() -> None:
    messages = [
        AssistantMessage(
            tool_calls=[
                ToolCallRequest(id="1", name="load_skill", arguments={"name": "a"}),
                ToolCallRequest(id="2", name="load_skill", arguments={"name": "nope"}),
                ToolCallRequest(id="3", name="load_skill", arguments={"name": "pending"}),
            ]
        ),
        create_tool_result_message(tool_call_id="1", tool_name="load_skill", result="# Skill: a"),
        create_tool_result_message(tool_call_id="2", tool_name="load_skill", success=False, error="Unknown skill"),
    ]
    assert collect_loaded_skill_names(messages) == {"a"}


# --- SKILL.md and the filesystem provider ------------------------------------------------------------


def test_parse_skill_file() -> None:
    parsed = parse_skill_file(DEPLOY_SKILL_MD)
    assert parsed.ok and parsed.metadata is not None
    assert parsed.metadata.name == "deploy-runbook"
    assert parsed.metadata.metadata == {"owner": "platform", "version": "2"}
    assert parsed.metadata.allowed_tools == ("shell", "read_file")
    assert parsed.body.startswith("# Deploy runbook")
    assert not parse_skill_file("# no frontmatter").ok
    assert "not closed" in (parse_skill_file("---\nname: a\n").error or "")
    assert "name" in (parse_skill_file("---\nname: Bad_Name\ndescription: d\n---\nbody").error or "")
    assert "empty" in (parse_skill_file("---\nname: a\ndescription: d\n---\n\n").error or "")
    assert "YAML" in (parse_skill_file("---\nname: [\n---\nbody").error or "")


async def test_the_filesystem_provider_lists_loads_and_reads(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = make_skills_root(tmp_path / "skills")
    (root / "Bad_Folder").mkdir()
    (root / "Bad_Folder" / "SKILL.md").write_text("---\nname: Bad_Folder\ndescription: d\n---\nb")
    (root / "renamed").mkdir()
    (root / "renamed" / "SKILL.md").write_text("---\nname: other\ndescription: d\n---\nb")
    provider = file_system_skill_provider([root])
    with caplog.at_level(logging.WARNING, logger="helix_dbos.skills"):
        names = sorted(m.name for m in await provider.list_skills())
    assert names == ["deploy-runbook", "pdf-processing"]
    assert "Bad_Folder" in caplog.text and "differs from the folder" in caplog.text
    skill = await provider.get_skill("deploy-runbook")
    assert skill is not None and skill.body.startswith("# Deploy runbook")
    assert [r.path for r in skill.resources] == ["assets/logo.txt", "references/checklist.md", "scripts/deploy.sh"]
    load = tools_of(agent(skills=provider))[LOAD_SKILL_TOOL_NAME]
    assert "- scripts/deploy.sh" in (await call(load, {"name": "deploy-runbook"}))[0]
    read = tools_of(agent(skills=provider))[READ_SKILL_FILE_TOOL_NAME]
    args = {"name": "deploy-runbook", "path": "references/checklist.md", "startLine": 9}
    assert (await call(read, args))[0] == "check 9\ncheck 10\n"
    assert (await call(read, {**args, "startLine": None}))[0] == CHECKLIST
    assert await provider.get_skill("../skills") is None


async def test_read_skill_file_refuses_path_traversal(tmp_path: Path) -> None:
    root = make_skills_root(tmp_path / "skills")
    (tmp_path / "secret.txt").write_text("SECRET")
    read = tools_of(agent(skills=file_system_skill_provider([root])))[READ_SKILL_FILE_TOOL_NAME]
    for path in ("../../secret.txt", "references/../../../secret.txt", "../pdf-processing/SKILL.md"):
        with pytest.raises(SkillPathError, match=r"'\.\.' is refused"):
            await call(read, {"name": "deploy-runbook", "path": path})
    with pytest.raises(SkillPathError):  # the provider guards itself too, for callers other than the tool
        await file_system_skill_provider([root]).read_resource("deploy-runbook", "../../secret.txt")


async def test_read_skill_file_refuses_absolute_paths(tmp_path: Path) -> None:
    root = make_skills_root(tmp_path / "skills")
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    read = tools_of(agent(skills=file_system_skill_provider([root])))[READ_SKILL_FILE_TOOL_NAME]
    checklist = root / "deploy-runbook" / "references" / "checklist.md"
    for path in (str(secret), str(checklist)):  # even an absolute path into the skill's own folder
        with pytest.raises(SkillPathError, match="absolute paths are refused"):
            await call(read, {"name": "deploy-runbook", "path": path})


async def test_read_skill_file_refuses_symlinks_that_escape_the_skill_folder(tmp_path: Path) -> None:
    root = make_skills_root(tmp_path / "skills")
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    folder = root / "deploy-runbook"
    (folder / "references" / "leak.md").symlink_to(secret)
    (folder / "assets" / "outside").symlink_to(tmp_path, target_is_directory=True)
    (folder / "references" / "inside.md").symlink_to(folder / "references" / "checklist.md")
    provider = file_system_skill_provider([root])
    read = tools_of(agent(skills=provider))[READ_SKILL_FILE_TOOL_NAME]
    for path in ("references/leak.md", "assets/outside/secret.txt"):
        with pytest.raises(SkillPathError, match="outside the skill's folder"):
            await call(read, {"name": "deploy-runbook", "path": path})
    assert (await call(read, {"name": "deploy-runbook", "path": "references/inside.md"}))[0] == CHECKLIST
    skill = await provider.get_skill("deploy-runbook")
    assert skill is not None
    listed = [r.path for r in skill.resources]
    assert "references/leak.md" not in listed and "references/inside.md" in listed


# --- byte stability across processes ----------------------------------------------------------------

_PRINT_FRAGMENT = textwrap.dedent(
    """
    import asyncio, sys
    from helix_dbos import define_skill, in_code_skill_provider
    from helix_dbos.skills import file_system_skill_provider, resolve_skills_catalog
    from tests.skills.fixtures import write_skill_folder

    root, order = sys.argv[1], sys.argv[2].split(",")
    specs = {n: (f"Skill {n}. Use when {n} comes up.", f"# {n}\\nSteps for {n}.") for n in order}
    in_code = in_code_skill_provider([define_skill(n, description=d, body=b) for n, (d, b) in specs.items()])
    from pathlib import Path
    for n in order:  # created in this process's order: the directory listing order differs
        write_skill_folder(Path(root), n, *specs[n])
    fs = file_system_skill_provider([root])
    preload = {"omega", "mid-1", "zeta-ops"} - {"zeta-ops"}  # a set: its order follows the hash seed
    out = asyncio.run(resolve_skills_catalog(in_code, preload))
    out += "\\x00" + asyncio.run(resolve_skills_catalog(fs, preload))
    sys.stdout.buffer.write(out.encode())
    """
)


def test_two_processes_produce_identical_catalog_bytes(tmp_path: Path) -> None:
    names = ["zeta-ops", "alpha-db", "mid-1", "beta-2", "omega"]
    outputs = []
    for i, (seed, order) in enumerate([("1", names), ("4242", list(reversed(names)))]):
        proc = subprocess.run(
            [sys.executable, "-c", _PRINT_FRAGMENT, str(tmp_path / f"root{i}"), ",".join(order)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed},
            capture_output=True,
            check=True,
        )
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    in_code, fs = outputs[0].decode().split("\x00")
    assert in_code == fs  # both providers render the same skills identically
    assert in_code.index('name="alpha-db"') < in_code.index('name="beta-2"') < in_code.index('name="zeta-ops"')
    assert in_code.count('loaded="true"') == 2
