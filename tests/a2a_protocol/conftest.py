"""One real ``helix-dbos serve --a2a`` process on SQLite, serving ``tests.a2a_protocol.agents`` for the module.

Its ``boss`` reaches the same service's ``/a2a/digger`` over HTTP (``$HELIX_A2A_BASE``), so the
delegation crosses the wire like a call to any A2A agent; the ``pair`` of ends is one process.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from helix_dbos.store.migrate import upgrade
from tests.a2a_protocol.agents import ACME_TOKEN, TOKEN
from tests.serve_process import ServeProcess
from tests.tool_gate import ToolGate


@dataclass
class A2AService(ToolGate):
    """The service, and (``shared``: ``$HELIX_A2A_DIR``) the ``dig`` tool's execution log and gate."""

    serve: ServeProcess

    def url(self, agent: str) -> str:
        return f"{self.serve.base_url}/a2a/{agent}"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[A2AService]:
    root = tmp_path_factory.mktemp("a2a")
    shared = root / "shared"
    shared.mkdir()
    url = f"sqlite:///{root / 'a2a.sqlite'}"
    upgrade(url)
    serve = ServeProcess(
        "a2a", url, agents="tests.a2a_protocol.agents:a2a_agents", llm_adapter="tests.a2a_protocol.agents:model",
        token=TOKEN, logs=root, env={"HELIX_A2A_DIR": str(shared)},
        extra_args=["--a2a", "--tenant-token", f"acme={ACME_TOKEN}"],
    )  # fmt: skip
    serve.env["HELIX_A2A_BASE"] = serve.base_url
    try:
        serve.start()
        yield A2AService(shared=shared, serve=serve)
    finally:
        (shared / "gate").touch()  # release a tool still waiting
        serve.stop(fail_on_hang=False)


@pytest.fixture
def a2a(service: A2AService) -> Iterator[A2AService]:
    """The module's service with a fresh execution log and a closed gate."""
    for name in ("gate", "dig-entries"):
        (service.shared / name).unlink(missing_ok=True)
    yield service
    service.open_gate()
