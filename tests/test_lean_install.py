"""``pip install helix-dbos`` with no extras: the wheel, alone in a clean venv, imports and runs.

``tests/unit/test_optional_extras.py`` hides the packages it names from an interpreter that has
every extra; it cannot see a core import of a package that nobody thought to hide (the
OpenTelemetry API was one: DBOS brings it only with its own ``[otel]`` extra). Here the wheel built
from this work tree is installed into a fresh venv, without ``--system-site-packages``, so
the core gets exactly what ``[project].dependencies`` declares. CI installs ``[dev]``, so this is
what guards the lean install. The venv's packages come from the configured pip index.

Measured on a shared 2-core machine: 28-32 s for the file, of which building the wheel takes ~4 s,
the venv ~4 s and ``pip install`` ~14 s; the wheel and the venv are built once for all its tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Building runs setuptools in pip's isolated build env and installing resolves the core's
# dependencies from the index: both happen in the first test's setup.
pytestmark = pytest.mark.timeout(600)

# What the extras bring; none of it may be in the core install.
_EXTRA_MODULES = ("litellm", "mcp", "openai", "fastapi", "starlette", "sse_starlette", "uvicorn", "httpx")


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _clean_env() -> dict[str, str]:
    """This process's environment without what would point the venv at this checkout or its settings."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("HELIX_")}


@pytest.fixture(scope="session")
def core_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this work tree, built once per test session from a copy (no build/ in the tree)."""
    root = tmp_path_factory.mktemp("lean-wheel")
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "helix_dbos", src / "helix_dbos", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = root / "dist"
    proc = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist), str(src)],
        cwd=root,
        env=_clean_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = dist.glob("helix_dbos-*.whl")
    return wheel


@pytest.fixture(scope="module")
def lean_venv(core_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the core wheel installed, no extras: its ``bin`` directory."""
    venv = tmp_path_factory.mktemp("lean-venv") / "venv"
    env = _clean_env()
    # No pip of its own (ensurepip costs seconds): this interpreter's pip installs into it (--python).
    proc = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv.parent, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bin_dir = venv / "bin"
    install = ["install", "--quiet", "--no-compile", str(core_wheel)]
    proc = _run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), *install], cwd=venv.parent, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return bin_dir


@pytest.fixture
def in_venv(lean_venv: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An empty working directory and an environment whose PATH starts with the venv (as if activated)."""
    env = _clean_env()
    env["PATH"] = f"{lean_venv}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(lean_venv.parent)
    return tmp_path, env


def test_the_core_install_imports_without_any_extra(lean_venv: Path, in_venv: tuple[Path, dict[str, str]]) -> None:
    cwd, env = in_venv
    script = textwrap.dedent(
        f"""
        import importlib.util, sys
        import helix_dbos
        import helix_dbos.cli, helix_dbos.demo, helix_dbos.runtime.launch, helix_dbos.testing

        assert helix_dbos.__file__.startswith(sys.prefix), (helix_dbos.__file__, sys.prefix)
        present = [m for m in {_EXTRA_MODULES!r} if importlib.util.find_spec(m) is not None]
        assert not present, f"the core install has packages of the extras: {{present}}"
        assert importlib.util.find_spec("opentelemetry.sdk") is None  # [otel]
        print("OK")
        """
    )
    proc = _run([str(lean_venv / "python"), "-c", script], cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "OK"


def test_the_quickstart_demo_runs_on_the_core_install(in_venv: tuple[Path, dict[str, str]]) -> None:
    cwd, env = in_venv
    proc = _run(["helix-dbos", "demo"], cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: completed" in proc.stdout, proc.stdout
    assert (cwd / ".helix" / "helix.sqlite").exists()


@pytest.mark.parametrize(
    ("command", "extra_env", "extra"),
    [
        (["helix-dbos", "serve", "--agents", "demo", "--token", "t"], {}, "server"),
        (["helix-dbos", "demo"], {"HELIX_OTLP_ENDPOINT": "http://127.0.0.1:9"}, "otel"),
        (["python", "-c", "import helix_dbos.client"], {}, "client"),
    ],
    ids=["serve", "otlp-endpoint", "client"],
)
def test_a_command_that_needs_an_extra_names_it_in_one_line(
    in_venv: tuple[Path, dict[str, str]], command: list[str], extra_env: dict[str, str], extra: str
) -> None:
    cwd, env = in_venv
    proc = _run(command, cwd=cwd, env={**env, **extra_env})
    assert proc.returncode != 0, proc.stdout + proc.stderr
    hint = f"pip install 'helix-dbos[{extra}]'"
    last = proc.stderr.strip().splitlines()[-1]
    assert hint in last, proc.stderr
    if command[0] == "helix-dbos":  # the CLI says it in one line, no traceback
        assert proc.stderr.strip() == last, proc.stderr


def test_a_real_model_without_litellm_names_the_litellm_extra(
    lean_venv: Path, in_venv: tuple[Path, dict[str, str]]
) -> None:
    cwd, env = in_venv
    script = textwrap.dedent(
        """
        import asyncio
        from helix_dbos import LLMConfig, LLMGenerateInput, UserMessage
        from helix_dbos.llm.litellm import LiteLLMAdapter

        step = LLMGenerateInput([UserMessage(content="hi")], [], LLMConfig(model="openai/x"), "run", "agent")
        try:
            asyncio.run(LiteLLMAdapter().generate_step(step))
        except ImportError as exc:
            print(exc)
        """
    )
    proc = _run([str(lean_venv / "python"), "-c", script], cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("\n") == 1, proc.stdout
    assert "pip install 'helix-dbos[litellm]'" in proc.stdout
