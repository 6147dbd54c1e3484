"""The core installs lean: LiteLLM (``[litellm]``) and the HTTP stack (``[server]``) are optional.

Each check runs in a fresh interpreter whose import system refuses the optional packages, as if
they were not installed: ``import helix_dbos`` (and the other core entry points) must work, and
the code that needs a missing package must say, in one line, which extra installs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_BLOCKER = """
import sys

BLOCKED = {blocked!r}

class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Missing())
"""

_SERVER_PACKAGES = ("fastapi", "starlette", "sse_starlette", "uvicorn")
_LITELLM_PACKAGES = ("litellm", "openai", "mcp")


def _run(blocked: tuple[str, ...], body: str) -> str:
    script = _BLOCKER.format(blocked=set(blocked)) + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_core_imports_without_litellm_or_the_server_stack() -> None:
    out = _run(
        _SERVER_PACKAGES + _LITELLM_PACKAGES,
        """
        import helix_dbos
        import helix_dbos.cli
        import helix_dbos.demo
        import helix_dbos.runtime.launch
        import helix_dbos.testing
        from helix_dbos.llm.litellm import LiteLLMAdapter

        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        assert isinstance(LiteLLMAdapter(), helix_dbos.LLMAdapter)
        print("OK")
        """,
    )
    assert out.strip() == "OK"


def test_litellm_missing_names_the_litellm_extra() -> None:
    out = _run(
        _LITELLM_PACKAGES,
        """
        import asyncio
        from helix_dbos import LLMConfig, LLMGenerateInput, UserMessage
        from helix_dbos.llm.litellm import LiteLLMAdapter

        step = LLMGenerateInput([UserMessage(content="hi")], [], LLMConfig(model="openai/x"), "run", "agent")
        try:
            asyncio.run(LiteLLMAdapter().generate_step(step))
        except ImportError as exc:
            print(exc)
        """,
    )
    assert "pip install 'helix-dbos[litellm]'" in out
    assert out.count("\n") == 1, out  # one line


@pytest.mark.parametrize("missing", ["fastapi", "sse_starlette"])
def test_service_without_its_stack_names_the_server_extra(missing: str) -> None:
    out = _run(
        (missing,),
        """
        import helix_dbos
        try:
            import helix_dbos.service
        except ImportError as exc:
            print(exc)
        """,
    )
    assert "pip install 'helix-dbos[server]'" in out
    assert missing in out
    assert out.count("\n") == 1, out


def test_serve_without_uvicorn_names_the_server_extra() -> None:
    out = _run(
        ("uvicorn",),
        """
        from helix_dbos.service.server import run_server
        try:
            run_server(
                agents=[], database_url="sqlite://", host="127.0.0.1", port=0, executor_id=None,
                tokens=["t"], allow_unauthenticated=False,
            )
        except ImportError as exc:
            print(exc)
        """,
    )
    assert "pip install 'helix-dbos[server]'" in out


def test_the_client_without_httpx_names_the_client_extra() -> None:
    """The core (remote sub-agent definitions included) needs no httpx; the client says which extra does."""
    out = _run(
        ("httpx",),
        """
        import helix_dbos
        from helix_dbos.remote_sub_agent import create_remote_sub_agent_tool
        import helix_dbos.runtime.tools
        try:
            import helix_dbos.client
        except ImportError as exc:
            print(exc)
        """,
    )
    assert "pip install 'helix-dbos[client]'" in out
    assert "httpx" in out
    assert out.count("\n") == 1, out


def test_the_toolkit_needs_no_server_stack_except_its_sse_handler() -> None:
    """Wire events, the state streamer and the projector are core; the ASGI handler names the extra."""
    out = _run(
        _SERVER_PACKAGES,
        """
        from helix_dbos.stream.events import parse_stream_event, to_sse_message
        from helix_dbos.stream.projection import StreamProjector
        from helix_dbos.stream.state_streamer import create_state_streamer
        try:
            import helix_dbos.stream.resumable
        except ImportError as exc:
            print(exc)
        """,
    )
    assert "pip install 'helix-dbos[server]'" in out
    assert out.count("\n") == 1, out


def test_mcp_missing_names_the_mcp_extra_when_a_server_is_defined() -> None:
    out = _run(
        ("mcp", "mcp_types"),
        """
        import helix_dbos
        from helix_dbos.mcp import MCPServerStdio

        try:
            MCPServerStdio(name="files", command="files-server")
        except ImportError as exc:
            print(exc)
        """,
    )
    assert "pip install 'helix-dbos[mcp]'" in out
    assert out.count("\n") == 1, out  # one line


def test_a2a_missing_names_the_a2a_extra_before_the_app_is_built() -> None:
    out = _run(
        ("a2a",),
        """
        import helix_dbos.a2a  # the client transport and the hint need no SDK
        from helix_dbos.service.app import create_app

        try:
            create_app(None, allow_unauthenticated=True, a2a=True)  # refused before the executor is used
        except ImportError as exc:
            print(exc)
        """,
    )
    assert "pip install 'helix-dbos[a2a]'" in out
    assert out.count("\n") == 1, out


def test_serve_a2a_without_the_sdk_names_the_a2a_extra_before_the_database(tmp_path: Path) -> None:
    database = tmp_path / "never.sqlite"
    out = _run(
        ("a2a",),
        f"""
        from typer.testing import CliRunner
        from helix_dbos.cli import app

        result = CliRunner().invoke(
            app, ["serve", "--agents", "demo", "--a2a", "--allow-unauthenticated", "--database-url",
                  "sqlite:///{database}"],
        )
        print(result.exit_code, result.output.strip().splitlines()[-1])
        """,
    )
    assert "pip install 'helix-dbos[a2a]'" in out and not out.startswith("0"), out
    assert not database.exists()  # named before anything touched the database
